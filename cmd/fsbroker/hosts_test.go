// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// The host configurations of docs/hosts.md, run as written. Each marked
// block of the page is read from the Markdown, so the page cannot drift
// from what is tested: the example paths in it (fsbroker's binary, the
// project, the fleet's config file) are the only thing replaced, by the
// test's binary and temporary directories.
//
// Every host's fsbroker serve block (and the claude mcp add line) is started
// as written, with its command and arguments, as the MCP server the host
// would run, and the test plays the host: initialize, tools/list, and tool
// calls allowed and refused. Every host's wrap block runs the real fsbroker
// with its arguments, the server after fsbroker's "--" replaced by the
// example server, which prints the roots it is told. The MCP Inspector's block runs the real Inspector CLI
// from npm against the real reference filesystem server from npm, both
// pinned by testdata/hosts/package-lock.json, with the page's own command
// lines; it skips without node and npm unless FSBROKER_REQUIRE_INTEROP=1.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/npmtest"
	"github.com/fsbroker/fsbroker/serve"
)

// hostsDocDeps is the npm project of the Inspector test: the MCP Inspector
// and the reference filesystem server. The Inspector (version 2) declares
// node 22.19 or later for its HTTP proxy support, which it loads only for
// HTTP servers; its stdio client, all this test uses, runs on node 20, as
// the reference server does.
var hostsDocDeps = &npmtest.Project{
	Src:     "testdata/hosts",
	What:    "the MCP Inspector and the reference filesystem server",
	MinNode: 20,
	Marker:  "@modelcontextprotocol/inspector/package.json",
}

// hostsDocBlockMarker precedes each block of docs/hosts.md that this file
// runs as written: the marker names the block, a fenced json or sh block
// follows it.
var hostsDocBlockMarker = regexp.MustCompile("(?m)^<!-- cmd/fsbroker/hosts_test.go runs this block as written: ([a-z-]+) -->\n```(?:json|sh)\n((?s:.*?))\n```$")

// hostsDocBlocks returns the marked blocks of docs/hosts.md by name.
func hostsDocBlocks(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "hosts.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range hostsDocBlockMarker.FindAllStringSubmatch(string(doc), -1) {
		if _, dup := blocks[m[1]]; dup {
			t.Fatalf("docs/hosts.md marks two blocks %q", m[1])
		}
		blocks[m[1]] = m[2]
	}
	return blocks
}

// hostsDocBlock is the block of docs/hosts.md named name, its example paths
// replaced by paths; the test fails when there is no such block or when
// the block holds an example path the test does not know.
func hostsDocBlock(t *testing.T, name string, paths hostsDocPaths) string {
	t.Helper()
	blocks := hostsDocBlocks(t)
	b, ok := blocks[name]
	if !ok {
		names := make([]string, 0, len(blocks))
		for n := range blocks {
			names = append(names, n)
		}
		slices.Sort(names)
		t.Fatalf("docs/hosts.md has no block marked %q (have %v)", name, names)
	}
	b = strings.NewReplacer(
		"/usr/local/bin/fsbroker", brokerBin,
		"/Users/ann/project", paths.project,
		"/home/ann/project", paths.project,
		"/etc/fsbroker/fsbroker.yaml", paths.config,
	).Replace(b)
	if strings.Contains(b, "/ann/") || strings.Contains(b, "/etc/") {
		t.Fatalf("block %q of docs/hosts.md names a path this test does not replace:\n%s", name, b)
	}
	return b
}

// hostsDocPaths are what the tests put in place of the page's example
// paths: the project directory, and a config file naming it as the root.
type hostsDocPaths struct {
	project string
	config  string
}

// newHostsDocPaths makes a project directory (named project, as on the
// page) and a config file with it as the one root.
func newHostsDocPaths(t *testing.T) hostsDocPaths {
	t.Helper()
	p := hostsDocPaths{project: realDir(t, filepath.Join(t.TempDir(), "project"))}
	p.config = filepath.Join(t.TempDir(), "fsbroker.yaml")
	writeFile(t, p.config, fmt.Sprintf("version: 1\nroots:\n  - path: %s\n", p.project))
	return p
}

// hostsServerEntry is one server of a host's configuration file, with every
// member the page's blocks use.
type hostsServerEntry struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
	Roots   []hostsRoot       `json:"roots,omitempty"`
}

// hostsRoot is a root of the Inspector's per-server roots field.
type hostsRoot struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// hostsConfig is a host's configuration file: servers under mcpServers
// (Claude Desktop, Claude Code, Cursor, the Inspector) or servers (VS Code).
type hostsConfig struct {
	MCPServers map[string]hostsServerEntry `json:"mcpServers,omitempty"`
	Servers    map[string]hostsServerEntry `json:"servers,omitempty"`
}

// parseHostsConfig decodes a block as a host's configuration file, strictly
// (a member the test does not know fails it).
func parseHostsConfig(t *testing.T, name, block string) hostsConfig {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(block))
	dec.DisallowUnknownFields()
	var c hostsConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("block %q of docs/hosts.md is not a host configuration: %v\n%s", name, err, block)
	}
	return c
}

// onlyServer returns the one server of servers and its name.
func onlyServer(t *testing.T, servers map[string]hostsServerEntry) (string, hostsServerEntry) {
	t.Helper()
	if len(servers) != 1 {
		t.Fatalf("want one server, got %d: %+v", len(servers), servers)
	}
	for name, e := range servers {
		return name, e
	}
	panic("unreachable")
}

// hostsDocServer is the one server of the page's block name, which must
// have the shape its host reads: servers under key (mcpServers or servers)
// and nowhere else, with "type": "stdio" when typeStdio.
func hostsDocServer(t *testing.T, name, key string, typeStdio bool, paths hostsDocPaths) hostsServerEntry {
	t.Helper()
	c := parseHostsConfig(t, name, hostsDocBlock(t, name, paths))
	servers := c.MCPServers
	if key == "servers" {
		servers = c.Servers
	}
	if len(c.MCPServers)+len(c.Servers) != len(servers) {
		t.Fatalf("block %q names servers outside %s: %+v", name, key, c)
	}
	_, e := onlyServer(t, servers)
	if want := map[bool]string{true: "stdio"}[typeStdio]; e.Type != want {
		t.Errorf("block %q: type %q, want %q", name, e.Type, want)
	}
	return e
}

// wrapParts splits a wrapped server's args into fsbroker's flags and the
// server's command (after fsbroker's "--"); the test fails unless the args
// are fsbroker wrap's.
func wrapParts(t *testing.T, args []string) (flags, server []string) {
	t.Helper()
	if len(args) == 0 || args[0] != "wrap" {
		t.Fatalf("args %q: want fsbroker wrap", args)
	}
	i := slices.Index(args, "--")
	if i < 0 || i == len(args)-1 {
		t.Fatalf("args %q: want the server's command after fsbroker's --", args)
	}
	return args[1:i], args[i+1:]
}

// rootFlags returns the values of the --root flags among flags.
func rootFlags(flags []string) []string {
	var roots []string
	for i, f := range flags {
		switch {
		case f == "--root" && i+1 < len(flags):
			roots = append(roots, flags[i+1])
		case strings.HasPrefix(f, "--root="):
			roots = append(roots, strings.TrimPrefix(f, "--root="))
		}
	}
	return roots
}

// referenceServer is the command of the reference filesystem server, as the
// page's hosts start it, followed by its directories.
var referenceServer = []string{"npx", "-y", "@modelcontextprotocol/server-filesystem"}

// Each host's block in docs/hosts.md, as written: it has the shape its host
// reads (mcpServers or servers; type stdio where the host needs it), starts
// the fsbroker binary with wrap, and fsbroker, started with exactly those
// flags, serves the server the project as its one root (the example server
// in place of the server, printing the roots it is told). Every block that
// wraps the reference filesystem server gives it the same directories as
// fsbroker's roots, and the same arguments as the Inspector's block, which
// TestHostsDocInspector runs with the real server.
func TestHostsDocConfigs(t *testing.T) {
	t.Parallel()
	for _, host := range []struct {
		block     string
		key       string // where the host reads its servers from: mcpServers or servers
		typeStdio bool   // the host needs "type": "stdio"
		reference bool   // the block wraps the reference filesystem server
	}{
		{"claude-desktop", "mcpServers", false, true},
		{"claude-code", "mcpServers", true, true},
		{"vscode", "servers", true, true},
		{"cursor", "mcpServers", false, true},
		{"inspector", "mcpServers", false, true},
		{"managed", "mcpServers", false, false},
	} {
		t.Run(host.block, func(t *testing.T) {
			t.Parallel()
			paths := newHostsDocPaths(t)
			e := hostsDocServer(t, host.block, host.key, host.typeStdio, paths)
			if e.Command != brokerBin {
				t.Fatalf("command %q, want the fsbroker binary", e.Command)
			}
			flags, server := wrapParts(t, e.Args)
			if host.reference {
				n := len(referenceServer)
				if len(server) <= n || !slices.Equal(server[:n], referenceServer) || !slices.Equal(server[n:], rootFlags(flags)) {
					t.Errorf("server %q: want %q with fsbroker's roots %q", server, referenceServer, rootFlags(flags))
				}
				_, inspector := onlyServer(t, parseHostsConfig(t, "inspector", hostsDocBlock(t, "inspector", paths)).MCPServers)
				if !slices.Equal(e.Args, inspector.Args) {
					t.Errorf("args %q differ from the Inspector's block %q", e.Args, inspector.Args)
				}
			}

			args := append(append([]string{"wrap"}, flags...), "--", serverBin)
			p := startProc(t, exec.Command(e.Command, args...))
			hostInitialize(p, false)
			p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
			p.waitLog(regexp.MustCompile(regexp.QuoteMeta("initialized: 1 roots: file://" + paths.project + " (project)")))
			p.closeStdin()
			if code := p.waitExit(); code != 0 {
				t.Errorf("fsbroker exited with status %d, want 0\n%s", code, p.log())
			}
		})
	}
}

// The page's claude mcp add command lines add the same server as their
// .mcp.json blocks: Claude Code's options before the name (project scope,
// which is what writes .mcp.json), its "--", then the server's command
// exactly as the file has it. (Claude Code 2.1.328 writes that file from
// this line, "type" and "env" included; Claude Code is not installed here.)
func TestHostsDocClaudeCodeAdd(t *testing.T) {
	t.Parallel()
	for _, blocks := range [][2]string{{"claude-code-add", "claude-code"}, {"serve-claude-code-add", "serve-claude-code"}} {
		paths := newHostsDocPaths(t)
		name, e := onlyServer(t, parseHostsConfig(t, blocks[1], hostsDocBlock(t, blocks[1], paths)).MCPServers)
		if got := claudeMCPAdd(t, hostsDocBlock(t, blocks[0], paths), name); len(got) == 0 || got[0] != e.Command || !slices.Equal(got[1:], e.Args) {
			t.Errorf("%s adds the command %q, but %s has %q %q", blocks[0], got, blocks[1], e.Command, e.Args)
		}
	}
}

// claudeMCPAdd returns the server command a claude mcp add line adds under
// name; the test fails unless the line is one, with only the options a
// stdio server takes here, project scope (which writes .mcp.json), and the
// name followed by Claude Code's "--".
func claudeMCPAdd(t *testing.T, line, name string) []string {
	t.Helper()
	words := strings.Fields(line)
	if len(words) < 3 || !slices.Equal(words[:3], []string{"claude", "mcp", "add"}) {
		t.Fatalf("%q: want claude mcp add", line)
	}
	scope := "local" // Claude Code's default
	i := 3
	for ; i+1 < len(words) && strings.HasPrefix(words[i], "-"); i += 2 {
		switch words[i] {
		case "--scope", "-s":
			scope = words[i+1]
		case "--transport", "-t":
			if words[i+1] != "stdio" {
				t.Errorf("%q: transport %q, want stdio", line, words[i+1])
			}
		default:
			t.Errorf("%q: option %q is not one of claude mcp add's for a stdio server here", line, words[i])
		}
	}
	if scope != "project" {
		t.Errorf("%q: scope %q, but only --scope project writes .mcp.json", line, scope)
	}
	if i+1 >= len(words) || words[i] != name || words[i+1] != "--" {
		t.Fatalf("%q: want the name %q, then --", line, name)
	}
	return words[i+2:]
}

// serveHostBlocks are the page's fsbroker serve configurations, one a host,
// with where the host reads its servers (mcpServers or servers) and whether
// it needs "type": "stdio".
var serveHostBlocks = []struct {
	block, key string
	typeStdio  bool
}{
	{"serve-claude-desktop", "mcpServers", false},
	{"serve-claude-code", "mcpServers", true},
	{"serve-vscode", "servers", true},
	{"serve-cursor", "mcpServers", false},
}

// Each host's fsbroker serve block in docs/hosts.md, as written: it has the
// shape its host reads, starts the fsbroker binary with serve and the same
// arguments as every other host's (the project as its one root, --consent
// given), and fsbroker, started with exactly that command and those
// arguments, is the filesystem MCP server the page says (serveAsDocumented).
// The claude mcp add line adds the same command (TestHostsDocClaudeCodeAdd),
// and is run here too.
func TestHostsDocServeConfigs(t *testing.T) {
	t.Parallel()
	first := "" // the first block's args, its project written PROJECT
	for _, host := range serveHostBlocks {
		t.Run(host.block, func(t *testing.T) {
			paths := newHostsDocPaths(t)
			e := hostsDocServer(t, host.block, host.key, host.typeStdio, paths)
			if e.Command != brokerBin || len(e.Args) == 0 || e.Args[0] != "serve" {
				t.Fatalf("command %q %q, want the fsbroker binary with serve", e.Command, e.Args)
			}
			if roots := rootFlags(e.Args); !slices.Equal(roots, []string{paths.project}) || !slices.Contains(e.Args, "--consent") {
				t.Errorf("args %q: want the project as the one root (%q), and --consent", e.Args, roots)
			}
			args := strings.ReplaceAll(strings.Join(e.Args, " "), paths.project, "PROJECT")
			if first == "" {
				first = args
			} else if args != first {
				t.Errorf("args %q differ from the other hosts' %q", args, first)
			}
			serveAsDocumented(t, paths, append([]string{e.Command}, e.Args...))
		})
	}
	t.Run("serve-claude-code-add", func(t *testing.T) {
		paths := newHostsDocPaths(t)
		name, _ := onlyServer(t, parseHostsConfig(t, "serve-claude-code", hostsDocBlock(t, "serve-claude-code", paths)).MCPServers)
		serveAsDocumented(t, paths, claudeMCPAdd(t, hostsDocBlock(t, "serve-claude-code-add", paths), name))
	})
}

// serveAsDocumented starts argv (a host's fsbroker serve command, paths
// replaced) as the host would, plays the host over its stdin and stdout,
// and checks what docs/hosts.md says of it: initialize answers as fsbroker;
// tools/list is the reference filesystem server's; the project is the one
// allowed directory; a file in it is read; the .env beside it is refused
// by the secrets rule; a write is refused (--root is read-only) and the
// file left as it was; the session ends cleanly when the host closes it.
func serveAsDocumented(t *testing.T, paths hostsDocPaths, argv []string) {
	t.Helper()
	readme, secret := filepath.Join(paths.project, "README.md"), filepath.Join(paths.project, ".env")
	writeFile(t, readme, "# project\n")
	writeFile(t, secret, "TOKEN=not-for-hosts\n")
	p := startProcEnv(t, exec.Command(argv[0], argv[1:]...), "XDG_STATE_HOME="+t.TempDir())
	init := p.Call(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "hosts-doc-test", "version": "1"}})
	var info struct {
		ServerInfo struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}
	if init.Error != nil || json.Unmarshal(init.Result, &info) != nil || info.ServerInfo.Name != "fsbroker" {
		t.Fatalf("initialize: %s\n%s", init.Raw, p.log())
	}
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	var got, want any
	if tools := p.Call(2, "tools/list", map[string]any{}); tools.Error != nil || json.Unmarshal(tools.Result, &got) != nil {
		t.Fatalf("tools/list: %s", tools.Raw)
	}
	if err := json.Unmarshal(serve.ToolsListResult(), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tools/list is not the reference filesystem server's: %v", got)
	}
	call := func(id int, tool string, args map[string]any) (text string, isError bool) {
		t.Helper()
		r := p.Call(id, "tools/call", map[string]any{"name": tool, "arguments": args})
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Content) != 1 {
			t.Fatalf("%s: %s", tool, r.Raw)
		}
		return res.Content[0].Text, res.IsError
	}
	for n, c := range []struct {
		tool      string
		args      map[string]any
		isError   bool
		textStart string
	}{
		{"list_allowed_directories", map[string]any{}, false, "Allowed directories:\n" + paths.project},
		{"list_directory", map[string]any{"path": paths.project}, false, "[FILE] README.md"},
		{"read_text_file", map[string]any{"path": readme}, false, "# project\n"},
		{"read_text_file", map[string]any{"path": secret}, true, "PERMISSION_DENIED: secrets: "},
		{"write_file", map[string]any{"path": readme, "content": "changed"}, true, "PERMISSION_DENIED: "},
	} {
		text, isError := call(3+n, c.tool, c.args)
		if isError != c.isError || !strings.HasPrefix(text, c.textStart) || c.tool == "list_allowed_directories" && text != c.textStart {
			t.Errorf("%s %v: isError %v, %q; want isError %v and a text starting %q", c.tool, c.args, isError, text, c.isError, c.textStart)
		}
		if strings.Contains(text, ".env") && c.tool == "list_directory" {
			t.Errorf("list_directory shows the .env: %q", text)
		}
	}
	if b, err := os.ReadFile(readme); err != nil || string(b) != "# project\n" {
		t.Errorf("README.md is %q (%v) after a refused write", b, err)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("fsbroker serve exited with status %d, want 0\n%s", code, p.log())
	}
}

// inspectorTries bounds the runs of the Inspector that wait for the
// reference server to report the roots it was told. The server asks for its
// roots once initialized, without holding back the requests that follow, so
// the Inspector's call can be answered before the roots are (in about one
// run in twenty here); the answer is the same either way, because the
// server starts with fsbroker's root on its command line.
const inspectorTries = 10

// The Inspector's block in docs/hosts.md, with the Inspector's command lines
// as the page gives them, run with the real Inspector CLI against the real
// reference filesystem server under fsbroker wrap (npx finds both in the
// pinned install, so nothing is fetched):
//
//   - tools/list lists the reference server's tools exactly as it does
//     without fsbroker (the same Inspector, the same file, the server's own
//     command in fsbroker's place);
//   - list_allowed_directories answers the project, the root fsbroker told
//     the server: the server says it took one directory from the roots;
//   - Inspector roots wider than fsbroker's (the project's parent and a
//     directory outside it) still give the server one directory, the
//     project: fsbroker narrows the host's roots to its own;
//   - without the Inspector's roots field, fsbroker tells the server no
//     root, and the reference server says so and keeps the directory on its
//     command line, as the page warns.
func TestHostsDocInspector(t *testing.T) {
	t.Parallel()
	_, deps := hostsDocDeps.Installed(t)
	paths := newHostsDocPaths(t)
	block := hostsDocBlock(t, "inspector", paths)
	lines := strings.Split(hostsDocBlock(t, "inspector-cli", paths), "\n")
	listTools, allowedDirs := lines[0], lines[len(lines)-1]
	if len(lines) != 2 || !strings.Contains(listTools, "--method tools/list") ||
		!strings.Contains(allowedDirs, "--tool-name list_allowed_directories") {
		t.Fatalf("the inspector-cli block of docs/hosts.md: want a tools/list line and a list_allowed_directories line, got %q", lines)
	}
	configFile := regexp.MustCompile(`--config (\S+)`).FindStringSubmatch(listTools)
	if configFile == nil || !strings.Contains(allowedDirs, configFile[0]) {
		t.Fatalf("the Inspector's lines %q name no common --config FILE", lines)
	}

	c := parseHostsConfig(t, "inspector", block)
	name, wrapped := onlyServer(t, c.MCPServers)
	_, server := wrapParts(t, wrapped.Args)
	if len(wrapped.Roots) != 1 || wrapped.Roots[0].URI != "file://"+paths.project {
		t.Fatalf("the Inspector's roots %+v: want the project's", wrapped.Roots)
	}
	withEntry := func(e hostsServerEntry) []byte {
		b, err := json.Marshal(hostsConfig{MCPServers: map[string]hostsServerEntry{name: e}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	unwrapped := wrapped
	unwrapped.Command, unwrapped.Args = server[0], server[1:]

	// tools/list, wrapped (the page's file as written) and unwrapped.
	wrappedTools := runInspector(t, deps, configFile[1], []byte(block), listTools)
	directTools := runInspector(t, deps, configFile[1], withEntry(unwrapped), listTools)
	var got, want struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal([]byte(wrappedTools.stdout), &got); err != nil || len(got.Tools) == 0 {
		t.Fatalf("tools/list through fsbroker: %v\n%s\n%s", err, wrappedTools.stdout, wrappedTools.stderr)
	}
	if err := json.Unmarshal([]byte(directTools.stdout), &want); err != nil {
		t.Fatalf("tools/list without fsbroker: %v\n%s", err, directTools.stdout)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tools/list through fsbroker differs from the server's own:\n got: %s\nwant: %s", wrappedTools.stdout, directTools.stdout)
	}
	t.Logf("the reference server's %d tools, through fsbroker as without it", len(got.Tools))

	const told = "Updated allowed directories from MCP roots: 1 valid directories"
	checkAllowedDirs(t, deps, configFile[1], []byte(block), allowedDirs, paths.project, told)

	wider := wrapped
	wider.Roots = []hostsRoot{{URI: "file://" + filepath.Dir(paths.project)}, {URI: "file://" + realDir(t, t.TempDir())}}
	checkAllowedDirs(t, deps, configFile[1], withEntry(wider), allowedDirs, paths.project, told)

	noRoots := wrapped
	noRoots.Roots = nil
	checkAllowedDirs(t, deps, configFile[1], withEntry(noRoots), allowedDirs, paths.project, "No valid root directories provided by client")
}

// checkAllowedDirs runs the Inspector's list_allowed_directories line with
// config until the Inspector's stderr (where fsbroker's log is, the
// server's stderr in it) says serverSays, at most inspectorTries times, and
// checks that every answer is dir alone.
func checkAllowedDirs(t *testing.T, deps, configName string, config []byte, line, dir, serverSays string) {
	t.Helper()
	want := "Allowed directories:\n" + dir
	for range inspectorTries {
		r := runInspector(t, deps, configName, config, line)
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != want {
			t.Errorf("list_allowed_directories with %s answered %s (%v), want %q\n%s", config, r.stdout, err, want, r.stderr)
			return
		}
		if strings.Contains(r.stderr, serverSays) {
			return
		}
	}
	t.Errorf("in %d runs with %s, the reference server never said %q", inspectorTries, config, serverSays)
}

// inspectorOutput is what one run of the Inspector printed.
type inspectorOutput struct {
	stdout, stderr string
}

// runInspector runs one of the page's Inspector command lines with sh, in a
// new directory holding config under configName and the pinned install
// (node_modules, package.json), so that npx runs the pinned Inspector, which
// starts fsbroker, which starts the pinned reference server with npx. The
// environment is the broker's (brokerEnv), with HOME a new directory (the
// Inspector's own files stay there), and the Inspector keeps secrets in
// memory.
// The test fails when the line exits with an error.
func runInspector(t *testing.T, deps, configName string, config []byte, line string) inspectorOutput {
	t.Helper()
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(deps, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(deps, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "package.json"), string(pkg))
	writeFile(t, filepath.Join(work, configName), string(config))

	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = work
	cmd.Env = append(brokerEnv(), "HOME="+t.TempDir(), "MCP_INSPECTOR_SECRET_STORE=memory",
		"npm_config_update_notifier=false")
	// The Inspector, fsbroker, npx and the server go together when the time is up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s (in %s with %s): %v\n%s\n%s", line, work, config, err, stdout.String(), stderr.String())
	}
	return inspectorOutput{stdout: stdout.String(), stderr: stderr.String()}
}

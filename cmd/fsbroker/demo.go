package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// demoStep is one request the demo's server makes, and what a newcomer should
// notice about the answer.
type demoStep struct {
	say    string
	method string
	params map[string]any
}

// demoSteps is the guided session: consent first, then each built-in rule
// allows or denies once.
var demoSteps = []demoStep{
	{"the server asks which roots it may use", "roots/list", nil},
	{"it reads a file before anyone consented (denied: no consent grant)", "files/read",
		map[string]any{"path": "project/src/main.go"}},
	{"it asks to read the project, its .env and /etc (approved: the project; .env is a secret, /etc is outside the roots)",
		"files/consent", map[string]any{"message": "to index your code", "requestedPaths": []string{"project", "project/.env", "/etc"}}},
	{"it asks to write the README and the scratch root (approved: scratch only; the project root is read-only)",
		"files/consent", map[string]any{"message": "to save notes", "access": "write", "requestedPaths": []string{"project/README.md", "scratch"}}},
	{"it lists the project (.env is hidden: secrets)", "files/list", map[string]any{"path": "project"}},
	{"it reads a source file (allowed: consent given, policy agrees)", "files/read", map[string]any{"path": "project/src/main.go"}},
	{"it tries to read the project's .env (denied: secrets deny-list)", "files/read", map[string]any{"path": "project/.env"}},
	{"it tries to change the README (denied: no write consent there)", "files/write", map[string]any{"path": "project/README.md", "content": "pwned"}},
	{"it watches the scratch root for changes", "files/watch", map[string]any{"path": "scratch", "recursive": true}},
	{"it writes notes in the scratch root (allowed; its watch reports the change)", "files/write", map[string]any{"path": "scratch/notes.md", "content": "# Notes\n"}},
	{"it tries to climb out of its roots (refused before any decision)", "files/read", map[string]any{"path": "project/../../etc/passwd"}},
	{"it tries to write 2 KiB at once (denied: over the write limit, 1 KiB in this demo)", "files/write",
		map[string]any{"path": "scratch/big.bin", "content": strings.Repeat("x", 2048)}},
}

// runDemo runs `fsbroker demo`: a guided session on built-in defaults. A
// scripted MCP server (in this process, over real pipes) makes requests; the
// broker, exactly as `fsbroker stdio` runs it, decides and audits them; then
// the audit trail is shown and verified.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fsbroker demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "`DIR` for the demo's files, state and audit trail (default: a new temporary directory, kept)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelpShown
		}
		return &configError{msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return configErrorf("demo takes no arguments, got %q", fs.Args())
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "fsbroker-demo-")
		if err != nil {
			return fmt.Errorf("demo directory: %w", err)
		}
		*dir = d
	}
	project, scratch, state := filepath.Join(*dir, "project"), filepath.Join(*dir, "scratch"), filepath.Join(*dir, "state")
	files := map[string]string{
		filepath.Join(project, "README.md"):   "# Demo project\n",
		filepath.Join(project, "src/main.go"): "package main\n\nfunc main() {}\n",
		filepath.Join(project, ".env"):        "API_TOKEN=not-for-servers\n",
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return fmt.Errorf("demo files: %w", err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			return fmt.Errorf("demo files: %w", err)
		}
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return fmt.Errorf("demo files: %w", err)
	}

	o, _, err := parseOptions("stdio", []string{"--root", project, "--root", scratch + ":rw",
		"--state-dir", state, "--log-level", "error", "--max-write-bytes", "1024", "--consent", "auto"}, stderr)
	if err != nil {
		return err
	}
	o.askEvenIfAuto = true // show the consent round: auto answers it, but the server must ask
	s, err := prepare(o, stderr)
	if err != nil {
		return err
	}
	defer s.close()

	fmt.Fprintf(stdout, "fsbroker demo: a scripted MCP server asks the broker for files.\n")
	fmt.Fprintf(stdout, "  roots: %s (read-only), %s (writable); built-in policies; consent answered by\n", project, scratch)
	fmt.Fprintf(stdout, "  the auto provider (the default is a prompt on your terminal); audit trail in %s\n\n",
		filepath.Join(state, "audit"))

	toBroker, fromServer, err := os.Pipe()
	if err != nil {
		return err
	}
	fromBroker, toServer, err := os.Pipe()
	if err != nil {
		return err
	}
	stream := jsonrpc.NewLineStream(toBroker, toServer, o.maxMessageBytes)
	served := make(chan error, 1)
	go func() {
		served <- s.serve(ctx, stream)
		stream.Close()
	}()
	peer := &demoPeer{in: bufio.NewReader(fromBroker), pipe: fromBroker, out: fromServer}
	scriptErr := peer.run(stdout)
	fromServer.Close() // the server leaves: the session ends
	if err := <-served; err != nil {
		return err
	}
	fromBroker.Close()
	if scriptErr != nil {
		return scriptErr
	}
	s.close() // flush the trail and its last checkpoint before reading it
	s.trail = nil
	s.usage = nil
	s.decisions = nil

	fmt.Fprintf(stdout, "\nThe audit trail (fsbroker audit query --state-dir %s):\n\n", state)
	if err := runAudit(ctx, []string{"query", "--state-dir", state}, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nIs it intact? (fsbroker audit verify --state-dir %s)\n\n", state)
	return runAudit(ctx, []string{"verify", "--state-dir", state}, stdout, stderr)
}

// demoPeer plays the MCP server of the demo over the broker's pipes.
type demoPeer struct {
	in     *bufio.Reader
	pipe   *os.File // under in, for read deadlines
	out    io.Writer
	seq    int
	events []string // change events not printed yet
}

// demoMessage is what the demo reads from the broker.
type demoMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
		Data struct {
			Code       string `json:"code"`
			Reason     string `json:"reason"`
			DecisionID string `json:"decisionId"`
		} `json:"data"`
	} `json:"error"`
}

func (p *demoPeer) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = p.out.Write(append(b, '\n'))
	return err
}

func (p *demoPeer) read() (*demoMessage, error) {
	line, err := p.in.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("demo: the broker closed the session: %w", err)
	}
	var m demoMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return &m, nil
}

// run answers initialize, then makes each request of the script and prints
// the outcome.
func (p *demoPeer) run(stdout io.Writer) error {
	init, err := p.read()
	if err != nil {
		return err
	}
	if init.Method != "initialize" {
		return fmt.Errorf("demo: expected initialize, got %q", init.Method)
	}
	if err := p.send(map[string]any{"jsonrpc": "2.0", "id": init.ID, "result": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"serverInfo": map[string]any{"name": "demo-server", "version": "1.0.0"},
	}}); err != nil {
		return err
	}
	// Like any MCP server, wait for notifications/initialized before asking.
	for {
		m, err := p.read()
		if err != nil {
			return err
		}
		if m.Method == "notifications/initialized" {
			break
		}
	}
	for _, step := range demoSteps {
		params := step.params
		p.seq++
		req := map[string]any{"jsonrpc": "2.0", "id": p.seq, "method": step.method}
		if params != nil {
			req["params"] = params
		}
		if err := p.send(req); err != nil {
			return err
		}
		reply, err := p.awaitReply()
		if err != nil {
			return err
		}
		target := ""
		switch {
		case params["path"] != nil:
			target = fmt.Sprint(params["path"])
		case params["requestedPaths"] != nil:
			target = strings.Join(params["requestedPaths"].([]string), " ")
			if a, ok := params["access"].(string); ok {
				target += " (" + a + ")"
			}
		}
		fmt.Fprintf(stdout, "%d. %s\n   -> %s %s\n", p.seq, step.say, step.method, target)
		if reply.Error != nil {
			d := reply.Error.Data
			fmt.Fprintf(stdout, "   DENIED  %s: %s (decision %s)\n", d.Code, d.Reason, d.DecisionID)
			continue
		}
		fmt.Fprintf(stdout, "   ALLOWED %s\n", summarize(step.method, reply.Result))
		wait := time.Duration(0)
		if step.method == "files/write" && strings.HasPrefix(target, "scratch/notes") {
			wait = 2 * time.Second
		}
		p.printEvents(stdout, wait)
	}
	return nil
}

// awaitReply reads until the reply to the last request, answering the
// broker's own requests (ping) on the way.
func (p *demoPeer) awaitReply() (*demoMessage, error) {
	for {
		m, err := p.read()
		if err != nil {
			return nil, err
		}
		switch {
		case m.Method == "ping" && len(m.ID) > 0:
			if err := p.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}}); err != nil {
				return nil, err
			}
		case m.Method == "notifications/files/changed":
			p.noteEvent(m)
		case m.Method == "" && string(m.ID) == fmt.Sprint(p.seq):
			return m, nil
		}
	}
}

// noteEvent keeps a change event to print.
func (p *demoPeer) noteEvent(m *demoMessage) {
	var ev struct {
		Path  string `json:"path"`
		Event string `json:"event"`
	}
	if json.Unmarshal(m.Params, &ev) == nil {
		p.events = append(p.events, ev.Event+" "+ev.Path)
	}
}

// printEvents prints the change events received so far, waiting up to d for
// a first one when none came yet (events follow the change asynchronously).
func (p *demoPeer) printEvents(stdout io.Writer, d time.Duration) {
	if len(p.events) == 0 && d > 0 && p.pipe != nil {
		_ = p.pipe.SetReadDeadline(time.Now().Add(d))
		for len(p.events) == 0 {
			m, err := p.read()
			if err != nil {
				break
			}
			if m.Method == "notifications/files/changed" {
				p.noteEvent(m)
			}
		}
		_ = p.pipe.SetReadDeadline(time.Time{})
	}
	for _, e := range p.events {
		fmt.Fprintf(stdout, "   EVENT   %s (notifications/files/changed)\n", e)
	}
	p.events = nil
}

// summarize describes a result in a few words.
func summarize(method string, result json.RawMessage) string {
	var r struct {
		Roots   []struct{ URI string }  `json:"roots"`
		Entries []struct{ Path string } `json:"entries"`
		Length  int                     `json:"length"`
		Size    int64                   `json:"size"`
	}
	_ = json.Unmarshal(result, &r)
	switch method {
	case "roots/list":
		uris := make([]string, 0, len(r.Roots))
		for _, root := range r.Roots {
			uris = append(uris, root.URI)
		}
		return "roots: " + strings.Join(uris, ", ")
	case "files/list":
		paths := make([]string, 0, len(r.Entries))
		for _, e := range r.Entries {
			paths = append(paths, e.Path)
		}
		return "entries: " + strings.Join(paths, ", ")
	case "files/read":
		return fmt.Sprintf("%d bytes read", r.Length)
	case "files/write":
		return fmt.Sprintf("written, now %d bytes", r.Size)
	case "files/watch":
		return "watching"
	case "files/consent":
		var c struct {
			Granted       bool     `json:"granted"`
			ApprovedPaths []string `json:"approvedPaths"`
		}
		_ = json.Unmarshal(result, &c)
		if !c.Granted {
			return "nothing approved"
		}
		return "approved: " + strings.Join(c.ApprovedPaths, ", ")
	}
	return string(result)
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/sandbox"
)

// sandboxDirName is the directory in the state directory that holds the
// servers' private temporary directories.
const sandboxDirName = "sandbox"

// sandboxConfig is the config file's sandbox member (see docs/sandbox.md).
type sandboxConfig struct {
	// Mode is --sandbox: on, best-effort or off.
	Mode string `json:"mode"`
	// System replaces the default system paths (readable and executable).
	System []string `json:"system"`
	// Read and Write add readable (and executable) and writable paths.
	Read  []string `json:"read"`
	Write []string `json:"write"`
}

// sandboxOptions are --sandbox and the config file's sandbox section.
type sandboxOptions struct {
	mode   sandbox.Mode
	config sandbox.Config
}

// sandboxFlag is --sandbox: a bare --sandbox is on; --sandbox=best-effort
// and --sandbox=off say more.
type sandboxFlag struct{ o *options }

func (f sandboxFlag) String() string {
	if f.o == nil || f.o.sandbox.mode == "" {
		return string(sandbox.Off)
	}
	return string(f.o.sandbox.mode)
}

func (f sandboxFlag) Set(v string) error {
	m, err := sandbox.ParseMode(v)
	if err != nil {
		return err
	}
	f.o.sandbox.mode = m
	return nil
}

// Type is the name help gives the flag's value.
func (f sandboxFlag) Type() string { return "mode" }

// registerSandboxFlag adds --sandbox to a session command's flags.
func registerSandboxFlag(fs *pflag.FlagSet, o *options) {
	o.sandbox.mode = sandbox.Off
	f := fs.VarPF(sandboxFlag{o}, "sandbox", "", "confine with Landlock (Linux): the broker to its own paths, and a server it starts "+
		"to the roots, the system paths and a private TMPDIR; --sandbox=best-effort runs unconfined where Landlock is "+
		"missing; see docs/sandbox.md")
	f.NoOptDefVal = string(sandbox.On) // a bare --sandbox
}

// newSandboxHelperCommand returns the hidden sandbox.HelperCommand: the
// process fsbroker starts for a confined server, which confines itself and
// then executes the server (docs/sandbox.md). Its arguments are the encoded
// rules and the server's command line, parsed by the sandbox package.
func newSandboxHelperCommand() *cobra.Command {
	return &cobra.Command{
		Use:                sandbox.HelperCommand,
		Short:              "confine this process with Landlock, then execute the server",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return sandbox.RunHelper(args)
		},
	}
}

// mergeSandbox takes the config file's sandbox section: its mode when
// --sandbox is not given, and its paths (relative ones are relative to the
// config file's directory).
func (o *options) mergeSandbox(c *fileConfig) error {
	if c.Sandbox == nil {
		return nil
	}
	if c.Sandbox.Mode != "" && !o.set["sandbox"] {
		m, err := sandbox.ParseMode(c.Sandbox.Mode)
		if err != nil {
			return configErrorf("config %s: /sandbox/mode: %v", o.configPath, err)
		}
		o.sandbox.mode = m
	}
	abs := func(paths []string) []string {
		out := make([]string, 0, len(paths))
		for _, p := range paths {
			if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(o.configPath), p)
			}
			out = append(out, p)
		}
		return out
	}
	if c.Sandbox.System != nil {
		o.sandbox.config.System = abs(c.Sandbox.System)
	}
	o.sandbox.config.Read = abs(c.Sandbox.Read)
	o.sandbox.config.Write = abs(c.Sandbox.Write)
	return nil
}

// confinement is what --sandbox set up for a session command.
type confinement struct {
	// child runs the server confined; nil: the server (if any) starts as given.
	child *sandbox.Child
	// note says how the broker and the server are confined, for the
	// session_start record ("": nothing to say).
	note string
}

// close removes the server's temporary directory.
func (c *confinement) close() error {
	if c == nil || c.child == nil {
		return nil
	}
	return c.child.Close()
}

// confine applies --sandbox for cmd, whose server command (connect, wrap;
// nil for stdio and a remote server) is serverArgv: it prepares the
// server's confinement (its rules, its TMPDIR) and confines this process to
// what it needs, the server's paths included. Without Landlock, --sandbox
// is a configuration error naming it, and --sandbox=best-effort goes on
// unconfined. Without --sandbox, wrap says once that the server's own file
// I/O is not confined. It runs after prepare, before the server starts.
func (s *setup) confine(cmd string, serverArgv []string) error {
	c := &confinement{}
	s.confinement = c
	mode := s.opts.sandbox.mode
	switch {
	case mode == sandbox.Off || mode == "":
		if cmd == "wrap" && len(serverArgv) > 0 {
			c.note = "sandbox off: the server's own file I/O is not confined"
			s.log.Warn("the server's own file I/O is not confined: fsbroker controls only the roots it tells the server " +
				"and the files/* requests it sends; start with --sandbox to confine it (docs/sandbox.md)")
		}
		return nil
	case sandbox.ABI() < 1 && mode == sandbox.On:
		return configErrorf("--sandbox: %v; --sandbox=best-effort runs unconfined where Landlock is missing", sandbox.ErrUnavailable)
	case sandbox.ABI() < 1:
		status := sandbox.Status{Reason: sandbox.ErrUnavailable.Error()}
		c.note = fmt.Sprintf("sandbox %s: broker %s", mode, status)
		if len(serverArgv) > 0 {
			c.note += "; server not confined"
		}
		s.log.Warn("--sandbox=best-effort: Landlock is missing; the broker and the server run unconfined", "reason", status.Reason)
		return nil
	}
	var roots []sandbox.Root
	for _, r := range s.roots.All() {
		roots = append(roots, sandbox.Root{Path: r.Path, Writable: r.Writable})
	}
	rules := sandbox.ServerRules(s.opts.sandbox.config, roots)
	if len(serverArgv) > 0 {
		child, err := sandbox.NewChild(rules, serverArgv, filepath.Join(s.opts.stateDir, sandboxDirName))
		if err != nil {
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return configErrorf("server command %q: %v", serverArgv[0], err)
			}
			return err
		}
		c.child, rules = child, child.Rules()
	}
	own, err := s.ownRules()
	if err != nil {
		return err
	}
	brokerRules := rules.With(own)
	status, err := sandbox.Restrict(brokerRules, false)
	if err != nil {
		return fmt.Errorf("--sandbox: confine the broker: %w", err)
	}
	s.log.Info("the broker is confined", "landlock_abi", status.ABI)
	s.log.Debug("the broker's rules:\n" + brokerRules.Describe())
	c.note = fmt.Sprintf("sandbox %s: broker %s", mode, status)
	if c.child != nil {
		// The helper applies the server's rules with the same ABI.
		c.note += "; server " + status.String()
		s.log.Info("the server will run confined", "tmpdir", c.child.TempDir())
		s.log.Debug("the server's rules:\n" + c.child.Rules().Describe())
	}
	return nil
}

// ownRules are the broker's own paths beyond the server's: its state and
// audit directories, audit witness files and the terminal (writable); its
// policies, bundle and key, config file's directory, remote CA file,
// consent program and its own executable (readable; the last two
// executable).
func (s *setup) ownRules() (sandbox.Rules, error) {
	o := s.opts
	self, err := os.Executable()
	if err != nil {
		return sandbox.Rules{}, fmt.Errorf("--sandbox: fsbroker's own executable: %w", err)
	}
	r := sandbox.Rules{
		Read:  []string{self},
		Write: []string{o.stateDir, o.auditDirOrDefault(), "/dev/tty"},
	}
	for _, p := range []string{o.policiesDir, o.bundle, o.bundleKey, o.remoteCA} {
		if p != "" {
			r.Read = append(r.Read, p)
		}
	}
	if o.configPath != "" {
		r.Read = append(r.Read, filepath.Dir(o.configPath))
	}
	if named, ok := s.consent.(interface{ Name() string }); ok {
		if prog, ok := strings.CutPrefix(named.Name(), consent.NameCommand+":"); ok {
			r.Read = append(r.Read, prog)
		}
	}
	for _, spec := range o.auditWitness {
		if ws, err := audit.ParseWitnessSpec(spec, o.witnessBase); err == nil && ws.Path != "" {
			r.Write = append(r.Write, ws.Path)
		}
	}
	return r, nil
}

// serverCommand is the command that starts the server argv: through the
// sandbox helper when the server runs confined.
func (s *setup) serverCommand(argv []string) (name string, args []string, err error) {
	if s.confinement == nil || s.confinement.child == nil {
		return argv[0], argv[1:], nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("--sandbox: fsbroker's own executable: %w", err)
	}
	return s.confinement.child.Command(self)
}

// confinementNote is how the session's processes are confined, for its
// session_start record.
func (s *setup) confinementNote() string {
	if s.confinement == nil {
		return ""
	}
	return s.confinement.note
}

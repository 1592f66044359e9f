// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/sandbox"
)

// SandboxDirName is the directory in the state directory that holds the
// servers' private temporary directories.
const SandboxDirName = "sandbox"

// confinement is what Confine set up.
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

// Confine applies Config.Sandbox, once, before the server starts: it
// prepares the confinement of the server whose command line is serverArgv
// (nil: no server process, as for stdio and a remote server), its rules and
// its TMPDIR, and confines this process to what it needs, the server's
// paths included. Without Landlock, mode on is a *ConfigError naming it,
// and best-effort goes on unconfined, saying so. ownIO says the server
// opens files itself (wrap): unconfined, its session says so. The confining
// cannot be undone: this process stays confined after Close.
func (rt *Runtime) Confine(serverArgv []string, ownIO bool) error {
	c := &confinement{}
	rt.confinement = c
	mode := rt.cfg.Sandbox.Mode
	if err := sandboxAvailable(mode); err != nil {
		return err // Open refused it already; never read mode on as best-effort here
	}
	switch {
	case mode == sandbox.Off || mode == "":
		if ownIO && len(serverArgv) > 0 {
			c.note = "sandbox off: the server's own file I/O is not confined"
			rt.log.Warn("the server's own file I/O is not confined: fsbroker controls only the roots it tells the server " +
				"and the files/* requests it sends; start with --sandbox to confine it (docs/sandbox.md)")
		}
		return nil
	case sandbox.ABI() < 1:
		status := sandbox.Status{Reason: sandbox.ErrUnavailable.Error()}
		c.note = fmt.Sprintf("sandbox %s: broker %s", mode, status)
		if len(serverArgv) > 0 {
			c.note += "; server not confined"
		}
		rt.log.Warn("--sandbox=best-effort: Landlock is missing; the broker and the server run unconfined", "reason", status.Reason)
		return nil
	}
	var rs []sandbox.Root
	for _, r := range rt.started.All() {
		rs = append(rs, sandbox.Root{Path: r.Path, Writable: r.Writable})
	}
	rules := sandbox.ServerRules(rt.cfg.Sandbox.Paths, rs)
	var overlaps []string
	if len(serverArgv) > 0 {
		for _, o := range sandbox.ReadOnlyInWritable(rt.cfg.Sandbox.Paths, rs) {
			overlaps = append(overlaps, o.String())
		}
	}
	if len(overlaps) > 0 {
		why := strings.Join(overlaps, "; ") + ": Landlock rules add up, so the writable path's rights cover the read-only " +
			"root, and a confined server could write it"
		if mode == sandbox.On {
			return configErrorf("--sandbox: %s; make the outer path read-only, or give the read-only root outside it "+
				"(--sandbox=best-effort starts with the read-only root writable to the server, and says so)", why)
		}
		rt.log.Warn("--sandbox=best-effort: a read-only root is writable to the server: " + why)
	}
	sockets, err := sandbox.ParseUnixSockets(string(rt.cfg.Sandbox.Paths.UnixSockets))
	if err != nil {
		return configErrorf("--sandbox: %v", err)
	}
	if len(serverArgv) > 0 && sockets == sandbox.UnixSocketsDeny {
		if err := sandbox.UnixSocketFilterAvailable(); err != nil {
			if mode == sandbox.On {
				return configErrorf("--sandbox: %v; set sandbox.unixSockets: allow to confine the server's files only, "+
					"or use --sandbox=best-effort", err)
			}
			rt.log.Warn("--sandbox=best-effort: the server may create UNIX sockets", "reason", err)
			sockets = sandbox.UnixSocketsAllow
		}
	}
	if len(serverArgv) > 0 {
		child, err := sandbox.NewChild(rules, serverArgv, filepath.Join(rt.cfg.StateDir, SandboxDirName), sockets)
		if err != nil {
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return configErrorf("server command %q: %v", serverArgv[0], err)
			}
			return err
		}
		c.child, rules = child, child.Rules()
	}
	own, err := rt.ownRules()
	if err != nil {
		return err
	}
	brokerRules := rules.With(own)
	status, err := sandbox.Restrict(brokerRules, false)
	if err != nil {
		return fmt.Errorf("--sandbox: confine the broker: %w", err)
	}
	rt.log.Info("the broker is confined", "landlock_abi", status.ABI)
	rt.log.Debug("the broker's rules:\n" + brokerRules.Describe())
	c.note = fmt.Sprintf("sandbox %s: broker %s", mode, status)
	if c.child != nil {
		// The helper applies the server's rules with the same ABI.
		c.note += "; server " + status.String()
		if c.child.UnixSockets() == sandbox.UnixSocketsDeny {
			c.note += "; the server may not create UNIX sockets"
		} else {
			c.note += "; the server may create UNIX sockets"
		}
		for _, o := range overlaps {
			c.note += "; writable to the server: " + o
		}
		rt.log.Info("the server will run confined", "tmpdir", c.child.TempDir(), "unix_sockets", c.child.UnixSockets())
		rt.log.Debug("the server's rules:\n" + c.child.Rules().Describe())
	}
	return nil
}

// ownRules are the broker's own paths beyond the server's: its state and
// audit directories, audit witness files and the terminal (writable); its
// policies, bundle and key, config file's directory, Sandbox.BrokerReads,
// consent program and its own executable (readable; the last two
// executable).
func (rt *Runtime) ownRules() (sandbox.Rules, error) {
	cfg := rt.cfg
	self, err := os.Executable()
	if err != nil {
		return sandbox.Rules{}, fmt.Errorf("--sandbox: fsbroker's own executable: %w", err)
	}
	r := sandbox.Rules{
		Read:  []string{self},
		Write: []string{cfg.StateDir, cfg.Audit.DirIn(cfg.StateDir), "/dev/tty"},
	}
	for _, p := range append([]string{cfg.Policies.Dir, cfg.Policies.Bundle, cfg.Policies.BundleKey}, cfg.Sandbox.BrokerReads...) {
		if p != "" {
			r.Read = append(r.Read, p)
		}
	}
	if cfg.ConfigFile != "" {
		r.Read = append(r.Read, filepath.Dir(cfg.ConfigFile))
	}
	if named, ok := rt.consent.(interface{ Name() string }); ok {
		if prog, ok := strings.CutPrefix(named.Name(), consent.NameCommand+":"); ok {
			r.Read = append(r.Read, prog)
		}
	}
	for _, spec := range cfg.Audit.Witnesses {
		if ws, err := audit.ParseWitnessSpec(spec, cfg.Audit.WitnessBase); err == nil && ws.Path != "" {
			r.Write = append(r.Write, ws.Path)
		}
	}
	return r, nil
}

// ServerCommand is the command that starts the server argv: through the
// sandbox helper (this executable's sandbox.HelperCommand) when Confine
// confined the server, else argv as it is.
func (rt *Runtime) ServerCommand(argv []string) (name string, args []string, err error) {
	if rt.confinement == nil || rt.confinement.child == nil {
		return argv[0], argv[1:], nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("--sandbox: fsbroker's own executable: %w", err)
	}
	return rt.confinement.child.Command(self)
}

// confinementNote is how the session's processes are confined, for its
// session_start record.
func (rt *Runtime) confinementNote() string {
	if rt.confinement == nil {
		return ""
	}
	return rt.confinement.note
}

// sandboxAvailable refuses mode on where the kernel has no Landlock; Open
// checks it before it opens anything, so that the refusal is all a broker
// started with --sandbox there prints.
func sandboxAvailable(mode sandbox.Mode) error {
	if mode == sandbox.On && sandbox.ABI() < 1 {
		return configErrorf("--sandbox: %v; --sandbox=best-effort runs unconfined where Landlock is missing", sandbox.ErrUnavailable)
	}
	return nil
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// HelperCommand is the hidden fsbroker command that confines itself and
// then executes the server (see [RunHelper]).
const HelperCommand = "__sandbox-exec"

// TempDirEnv is the environment variable that names the server's private
// temporary directory.
const TempDirEnv = "TMPDIR"

// spec is what the broker tells the helper: the rules, whether the server
// may create UNIX sockets, the private temporary directory and the program
// to execute.
type spec struct {
	Rules       Rules       `json:"rules"`
	UnixSockets UnixSockets `json:"unixSockets"`
	TempDir     string      `json:"tempDir"`
	Path        string      `json:"path"`
	Argv        []string    `json:"argv"`
}

// Child is a server command prepared to run confined: its executable
// resolved, its private temporary directory made.
type Child struct {
	spec spec
}

// NewChild prepares argv (the server command, as given after --) to run
// under rules, creating UNIX sockets or not as sockets says ("": deny, as
// UnixSocketsDeny): the program is looked up in PATH now (a program that
// cannot be found is an error wrapping exec.ErrNotFound or fs.ErrNotExist,
// as starting it would give), a private temporary directory (mode 0700) is
// made in tempParent, and both are added to the rules: the executable
// readable and executable (that one file), the directory writable. Close
// removes the directory, which a confined broker can do only where it may
// write tempParent (fsbroker gives a directory in its state directory).
func NewChild(rules Rules, argv []string, tempParent string, sockets UnixSockets) (*Child, error) {
	if len(argv) == 0 {
		return nil, errors.New("sandbox: no server command")
	}
	sockets, err := ParseUnixSockets(string(sockets))
	if err != nil {
		return nil, err
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if fi.IsDir() {
		return nil, &fs.PathError{Op: "exec", Path: path, Err: fs.ErrPermission}
	}
	if err := os.MkdirAll(tempParent, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: the server's temporary directory: %w", err)
	}
	tmp, err := os.MkdirTemp(tempParent, "tmp-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: the server's temporary directory: %w", err)
	}
	rules = rules.With(Rules{Read: []string{path}, Write: []string{tmp}})
	return &Child{spec: spec{Rules: rules, UnixSockets: sockets, TempDir: tmp, Path: path, Argv: argv}}, nil
}

// Rules are the rules the server runs under, its executable and temporary
// directory included.
func (c *Child) Rules() Rules { return c.spec.Rules }

// UnixSockets says whether the server may create UNIX sockets.
func (c *Child) UnixSockets() UnixSockets { return c.spec.UnixSockets }

// TempDir is the server's private temporary directory (its TMPDIR).
func (c *Child) TempDir() string { return c.spec.TempDir }

// Command returns the command that runs the server confined: self (the
// fsbroker executable) with HelperCommand and the encoded spec, for
// RunHelper to apply in the new process before it executes the server.
func (c *Child) Command(self string) (name string, args []string, err error) {
	b, err := json.Marshal(c.spec)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: encode the server's rules: %w", err)
	}
	return self, []string{HelperCommand, string(b)}, nil
}

// Close removes the server's temporary directory and what it left there.
func (c *Child) Close() error {
	if err := os.RemoveAll(c.spec.TempDir); err != nil {
		return fmt.Errorf("sandbox: remove the server's temporary directory: %w", err)
	}
	return nil
}

// decodeSpec reads the helper's arguments: the encoded spec.
func decodeSpec(args []string) (spec, error) {
	var s spec
	if len(args) != 1 {
		return s, fmt.Errorf("%s: want one argument, the encoded rules, got %d", HelperCommand, len(args))
	}
	if err := json.Unmarshal([]byte(args[0]), &s); err != nil {
		return s, fmt.Errorf("%s: decode the rules: %w", HelperCommand, err)
	}
	if s.Path == "" || len(s.Argv) == 0 || s.TempDir == "" {
		return s, fmt.Errorf("%s: the rules name no program or no temporary directory", HelperCommand)
	}
	if s.UnixSockets != UnixSocketsDeny && s.UnixSockets != UnixSocketsAllow {
		return s, fmt.Errorf("%s: the rules say neither deny nor allow of UNIX sockets (%q)", HelperCommand, s.UnixSockets)
	}
	return s, nil
}

// environ is env with TMPDIR set to dir.
func environ(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if len(kv) > len(TempDirEnv) && kv[:len(TempDirEnv)+1] == TempDirEnv+"=" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, TempDirEnv+"="+dir)
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/broker/sandbox"
)

// sandboxConfig is the config file's sandbox member (see docs/sandbox.md).
type sandboxConfig struct {
	// Mode is --sandbox: on, best-effort or off.
	Mode string `json:"mode"`
	// System replaces the default system paths (readable and executable).
	System []string `json:"system"`
	// Read and Write add readable (and executable) and writable paths.
	Read  []string `json:"read"`
	Write []string `json:"write"`
	// UnixSockets is whether the server may create UNIX sockets: deny (the
	// default) or allow.
	UnixSockets string `json:"unixSockets"`
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
	sockets, err := sandbox.ParseUnixSockets(c.Sandbox.UnixSockets)
	if err != nil {
		return configErrorf("config %s: /sandbox/unixSockets: %v", o.configPath, err)
	}
	o.sandbox.config.UnixSockets = sockets
	return nil
}

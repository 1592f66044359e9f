// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Access rights, as Landlock names them.
const (
	readRights = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	// fileRights are the rights that a rule on a file (not a directory) may
	// hold.
	fileRights = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev)
	referRight = landlock.AccessFSSet(ll.AccessFSRefer)
)

// ABI is the Landlock ABI version the kernel offers (0: none).
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// Restrict confines the calling process (every thread) and the programs it
// executes from now on to r, with the highest Landlock ABI the kernel
// offers: every file system access the kernel's Landlock can restrict is
// refused outside r. With scoped, the process can no longer signal, nor
// connect to the abstract UNIX sockets of, processes outside its own
// confinement (Landlock ABI 6 and later). Restrict can only narrow: rules
// applied before stay. Where the kernel has no Landlock it returns
// ErrUnavailable and changes nothing.
func Restrict(r Rules, scoped bool) (Status, error) {
	abi := ABI()
	if abi < 1 {
		return Status{Reason: ErrUnavailable.Error()}, ErrUnavailable
	}
	// Every right the library knows; BestEffort narrows them to the kernel's.
	all := landlock.V11.HandledAccessFS
	write := all
	if abi < 2 {
		// Without the refer right handled (ABI 1), the kernel refuses every
		// rename or link across directories anyway; asking for it would make
		// the library drop the whole ruleset.
		write &^= referRight
	}
	args := []any{all}
	if scoped {
		args = append(args, landlock.V11.Scoped)
	}
	cfg, err := landlock.NewConfig(args...)
	if err != nil {
		return Status{}, fmt.Errorf("landlock config: %w", err)
	}
	var rules []landlock.Rule
	for _, list := range []struct {
		paths  []string
		rights landlock.AccessFSSet
	}{{r.Read, readRights}, {r.Write, write}} {
		for _, p := range list.paths {
			fi, err := os.Stat(p)
			switch {
			case errors.Is(err, os.ErrNotExist):
				continue // a system path this system does not have
			case err != nil:
				return Status{}, fmt.Errorf("sandbox rule %s: %w", p, err)
			}
			rights := list.rights
			if !fi.IsDir() {
				rights &= fileRights
			}
			rules = append(rules, landlock.PathAccess(rights, p).IgnoreIfMissing())
		}
	}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return Status{}, fmt.Errorf("apply the Landlock ruleset: %w", err)
	}
	return Status{ABI: abi}, nil
}

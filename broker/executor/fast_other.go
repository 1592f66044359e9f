// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package executor

import (
	"errors"

	"github.com/fsbroker/fsbroker/broker/canon"
)

// fastRoot is Linux's (see fast_linux.go); elsewhere there are no fast
// paths, and every operation goes through the root's os.Root.
type fastRoot struct{}

func openFastRoot(string, Info) (*fastRoot, error) { return nil, nil }

func (*fastRoot) close() error { return nil }

func (*fastRoot) resolve(canon.Path, bool, Info) (Target, bool) { return Target{}, false }

func (*fastRoot) resolveHeld(canon.Path) (Target, bool) { return Target{}, false }

// heldFile is never made here: ResolveRead resolves as Resolve does.
type heldFile struct{}

func (*heldFile) release() {}

func (*heldFile) reopen(Target) (fileReader, Info, error) { return nil, Info{}, errNotHeld }

// errNotHeld says that a target holds nothing: Read looks the path up.
var errNotHeld = errors.New("executor: the target holds nothing")

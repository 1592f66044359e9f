// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package executor

import "github.com/fsbroker/fsbroker/broker/canon"

// fastRoot is Linux's (see fast_linux.go); elsewhere there are no fast
// paths, and every operation goes through the root's os.Root.
type fastRoot struct{}

func openFastRoot(string, Info) (*fastRoot, error) { return nil, nil }

func (*fastRoot) close() error { return nil }

func (*fastRoot) resolve(canon.Path, bool, Info) (Target, bool) { return Target{}, false }

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package usage

import "errors"

// mapGeneration is not available here: the Store checks each cached count
// with a stat of its file (see the package documentation).
func mapGeneration(string) (*generation, error) {
	return nil, errors.New("no shared memory counter on this platform")
}

// generation is never made on this platform.
type generation struct{}

func (g *generation) load(int) (uint64, bool) { return 0, false }

func (g *generation) bump(int) (uint64, bool) { return 0, false }

func (g *generation) unmap() error { return nil }

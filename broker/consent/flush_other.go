// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix && !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package consent

import "os"

// flushInput does nothing where no flush is wired up: typed-ahead keys may
// then answer a prompt.
func flushInput(*os.File) {}

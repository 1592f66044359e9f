// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package cputime

import "time"

// Process is not measured on this platform: false.
func Process() (time.Duration, bool) { return 0, false }

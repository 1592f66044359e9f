// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package grants_test

import "time"

// processCPUTime is not measured on this platform: false.
func processCPUTime() (time.Duration, bool) { return 0, false }

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package helperproc

// raceEnabled: the tests run without the race detector, and so do the
// helper programs they build.
const raceEnabled = false

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package helperproc

// raceEnabled: the tests run under the race detector, so the helper
// programs they build are built with it too.
const raceEnabled = true

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package conformance

// raceEnabled: the tests run without the race detector.
const raceEnabled = false

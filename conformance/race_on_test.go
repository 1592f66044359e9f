// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package conformance

// raceEnabled: the tests run under the race detector, so the broker they build gets it too.
const raceEnabled = true

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package main

// raceEnabled: the test binary runs without the race detector.
const raceEnabled = false

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package main

// raceEnabled: the test binary runs under the race detector, so the broker
// binary it drives is built with -race too.
const raceEnabled = true

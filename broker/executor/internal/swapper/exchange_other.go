// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import "errors"

// exchange needs renameat2(2), which only Linux has.
func exchange(a, b string) error { return errors.New("mode exchange needs Linux") }

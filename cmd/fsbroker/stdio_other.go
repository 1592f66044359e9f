// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import "io"

// pollableStdio returns stdin and stdout unchanged: reopening a pipe as a
// new open file description (see stdio_linux.go) needs Linux's /proc.
func pollableStdio(stdin io.Reader, stdout io.Writer) (io.Reader, io.Writer) { return stdin, stdout }

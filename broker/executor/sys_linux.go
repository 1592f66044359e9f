// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor

import "syscall"

func ctimeNs(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }

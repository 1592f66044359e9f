// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package cputime tells the CPU time the whole process has used, for the
// benchmarks that report it per operation beside the wall time (cpu-ns/op):
// on the shared machines they run on, the time other processes had the cores
// is left out of it.
package cputime

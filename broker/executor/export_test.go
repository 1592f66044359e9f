// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

// WithoutFastPaths turns the Linux fast paths off (see fastRoot), so that a
// test runs every check through the portable paths (os.Root) too: the paths
// taken where openat2 is missing or refused.
func WithoutFastPaths() Option { return func(x *Executor) { x.noFast = true } }

// Holds reports whether t keeps its file open (ResolveRead's fast path).
func Holds(t Target) bool { return t.held != nil }

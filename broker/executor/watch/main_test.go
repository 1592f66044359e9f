// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package watch

import (
	"os"
	"testing"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// TestMain removes the helper programs the tests built (the swapper).
func TestMain(m *testing.M) { os.Exit(helperproc.Run(m, nil)) }

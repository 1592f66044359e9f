// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// TestServeClientIDFlag: --client-id is fsbroker serve's name for
// --server-id (protocol.md section 8); the two naming different ids is a
// usage error, and neither is taken for another command.
func TestServeClientIDFlag(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runCmd(t, "serve", "--root", dir, "--state-dir", t.TempDir(), "--client-id", "a", "--server-id", "b")
	if code != exitUsage || !strings.Contains(errOut, "--client-id") {
		t.Errorf("serve --client-id a --server-id b: exit %d, %s; want a usage error naming both", code, errOut)
	}
	_, errOut, code = runCmd(t, "stdio", "--root", dir, "--state-dir", t.TempDir(), "--client-id", "a")
	if code != exitUsage || !strings.Contains(errOut, "client-id") {
		t.Errorf("stdio --client-id: exit %d, %s; want a usage error", code, errOut)
	}
}

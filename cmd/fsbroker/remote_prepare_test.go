// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/transport/remote"
	"github.com/fsbroker/fsbroker/internal/leakcheck"
)

// TestRemoteStreamClosedWhenOpenFailsAfterPreflight: connect --url makes
// its stream to the remote server in the runtime's preflight, before the
// stores, policies and audit trail are opened. When one of those then
// fails for real (here the audit directory is a file), prepare returns the
// error and leaves nothing open: the stream is closed (its Read ends at
// once with io.EOF, where an open stream would wait for the server), and
// the process has no more goroutines or open files than before. Not
// parallel: the counts are the whole process's.
func TestRemoteStreamClosedWhenOpenFailsAfterPreflight(t *testing.T) {
	base := realDir(t, t.TempDir())
	root := realDir(t, filepath.Join(base, "project"))
	auditFile := filepath.Join(base, "audit")
	writeFile(t, auditFile, "")
	o, _, err := parseOptions("connect", []string{"--root", root, "--state-dir", filepath.Join(base, "state"),
		"--audit", auditFile, "--consent", "deny", "--url", "http://127.0.0.1:1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	before := leakcheck.Take(t)
	var made *remote.Stream
	madeBy := func(s *setup) error { made = s.remote; return nil } // runs after remoteCheck
	s, err := prepare(o, io.Discard, remoteCheck, madeBy)
	if err == nil {
		s.close()
		t.Fatal("prepare succeeded with an audit directory that is a file")
	}
	if !strings.Contains(err.Error(), "--audit "+auditFile) {
		t.Errorf("error %q does not name --audit %s", err, auditFile)
	}
	if made == nil {
		t.Fatal("the preflight made no remote stream: the failure came before it, and the test tests nothing")
	}
	t.Cleanup(func() { _ = made.Close() }) // ends the Read below if prepare left it open
	before.Settle(t)
	read := make(chan error, 1)
	go func() {
		_, err := made.Read()
		read <- err
	}()
	select {
	case err := <-read:
		if !errors.Is(err, io.EOF) {
			t.Errorf("Read of the stream after prepare failed: %v, want io.EOF (closed)", err)
		}
	case <-time.After(waitLimit):
		t.Errorf("the remote stream is still open %s after prepare failed: its Read waits for the server", waitLimit)
	}
}

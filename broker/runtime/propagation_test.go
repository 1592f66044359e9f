// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// listChanged is the notification that tells a server its roots, or its
// access to them, changed.
const listChanged = "notifications/roots/list_changed"

// TestRevocationReachesEveryServedSession: two sessions of one server
// identity, served at once by one runtime over real pipes, hear of a
// revocation and of a block that another grants store on the same state
// directory makes (as fsbroker grants revoke does, from its own process):
// each session is sent notifications/roots/list_changed after the change,
// and its next files/read of what was taken away is refused, while what
// was not taken away still reads. Every wait is bounded (mcppeer's), so
// propagation that does not happen fails the test with the sessions'
// transcripts instead of hanging it.
func TestRevocationReachesEveryServedSession(t *testing.T) {
	base := testfs.RealDir(t, t.TempDir())
	shared := testfs.RealDir(t, filepath.Join(base, "shared"))
	open := testfs.RealDir(t, filepath.Join(base, "open"))
	testfs.WriteFile(t, filepath.Join(shared, "a.txt"), "granted")
	testfs.WriteFile(t, filepath.Join(open, "b.txt"), "pre-approved")
	state := filepath.Join(base, "state")
	rt, err := Open(context.Background(), Config{
		StateDir: state,
		ServerID: "notes", // both sessions are the server the operator pinned as notes
		Roots: []roots.Spec{
			{Path: shared, Mount: "shared", Origin: "--root " + shared},
			{Path: open, Mount: "open", Preapproved: true, Origin: "--root " + open},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the sessions' own cleanups.
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	// The other process on the state directory, which grants shared to
	// notes before the sessions start.
	other, err := grants.Open(filepath.Join(state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	sharedRoot, ok := rt.Roots().ByMount("shared")
	if !ok {
		t.Fatal("no root shared")
	}
	if _, err := other.Grant("notes", grants.Grant{Access: grants.Read, Path: "shared",
		Root: grants.RootOf(sharedRoot), By: "the test"}); err != nil {
		t.Fatal(err)
	}

	servers := []*servedServer{serveOver(t, rt, "server one"), serveOver(t, rt, "server two")}
	for _, s := range servers {
		s.expectRead(t, "shared/a.txt", "granted")
		s.expectRead(t, "open/b.txt", "pre-approved")
	}

	marks := marksOf(servers)
	if _, err := other.Revoke(grants.RevokeFilter{Server: "notes"}); err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		s.awaitListChangedSince(marks[i], "the revocation")
		s.expectRefused(t, "shared/a.txt")
		s.expectRead(t, "open/b.txt", "pre-approved")
	}

	marks = marksOf(servers)
	if _, _, err := other.Block(grants.Block{Server: grants.AllServers, Path: "open", By: "the test"}); err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		s.awaitListChangedSince(marks[i], "the block")
		s.expectRefused(t, "open/b.txt")
	}
}

// servedServer is the server's side of a session the runtime serves.
type servedServer struct {
	*mcppeer.Peer
	reads int // files/read requests sent, for their ids
}

// serveOver starts a session of rt over real pipes, served by rt.Serve, and
// returns the server's side, initialized, named name (its serverInfo name:
// the runtime's pinned identity is what its grants belong to). At the end
// of the test the server's side closes and Serve must return, within
// mcppeer.DefaultWait.
func serveOver(t *testing.T, rt *Runtime, name string) *servedServer {
	t.Helper()
	brokerSide, serverSide := mcppeer.Pipes(t)
	sess, err := rt.NewSession(brokerSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- rt.Serve(context.Background(), sess) }()
	t.Cleanup(func() {
		_ = serverSide.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("%s: Serve: %v", name, err)
			}
		case <-time.After(mcppeer.DefaultWait):
			t.Errorf("%s: Serve did not return within %s of the server's end", name, mcppeer.DefaultWait)
		}
	})
	server := mcppeer.New(t, name, serverSide, mcppeer.RequireValid())
	server.AcceptInitialize("2025-11-25", mcppeer.Implementation{Name: name, Version: "1.0.0"})
	return &servedServer{Peer: server}
}

// marksOf are how many messages each server has received so far.
func marksOf(servers []*servedServer) []int {
	marks := make([]int, len(servers))
	for i, s := range servers {
		marks[i] = len(s.All())
	}
	return marks
}

// awaitListChangedSince takes the first notifications/roots/list_changed
// that s received after its first mark messages: one sent after what
// happened, not a late one about an earlier change.
func (s *servedServer) awaitListChangedSince(mark int, after string) {
	s.Await(listChanged+" after "+after, func(m *mcppeer.Message) bool {
		return m.Seq >= mark && m.IsNotification(listChanged)
	})
}

// read sends files/read of path and returns its reply.
func (s *servedServer) read(path string) *mcppeer.Message {
	s.reads++
	return s.Call(fmt.Sprintf("read-%d", s.reads), "files/read", map[string]any{"path": path})
}

// expectRead checks that files/read of path gives content.
func (s *servedServer) expectRead(t *testing.T, path, content string) {
	t.Helper()
	reply := s.read(path)
	var result struct {
		Content string `json:"content"`
	}
	if reply.Error != nil || json.Unmarshal(reply.Result, &result) != nil || result.Content != content {
		t.Fatalf("files/read %s: %s; want the content %q", path, reply.Raw, content)
	}
}

// expectRefused checks that files/read of path is refused with
// PERMISSION_DENIED.
func (s *servedServer) expectRefused(t *testing.T, path string) {
	t.Helper()
	reply := s.read(path)
	var data struct {
		Code string `json:"code"`
	}
	if reply.Error == nil || json.Unmarshal(reply.Error.Data, &data) != nil || data.Code != "PERMISSION_DENIED" {
		t.Fatalf("files/read %s: %s; want it refused with PERMISSION_DENIED", path, reply.Raw)
	}
}

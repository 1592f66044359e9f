// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// hostSubtree writes rw/sub/in.txt and rw/other.txt in f's writable root,
// and returns the roots of a host that names rw/sub alone.
func hostSubtree(t *testing.T, f *fixture) *roots.HostRoots {
	t.Helper()
	for name, content := range map[string]string{"sub/in.txt": "in\n", "other.txt": "other\n"} {
		p := filepath.Join(f.rw, name)
		testfs.RealDir(t, filepath.Dir(p))
		testfs.WriteFile(t, p, content)
	}
	result, _ := json.Marshal(map[string]any{"roots": []map[string]string{{"uri": roots.FileURI(filepath.Join(f.rw, "sub"))}}})
	host, _, err := roots.ParseHostRoots(result)
	if err != nil {
		t.Fatal(err)
	}
	return host
}

// TestRequestRootsNarrowOnlyTheirRequest: a request run under a context
// carrying its own narrowing (WithRequestRoots: fsbroker serve's requests
// of protocol 2026-07-28, under the roots the host sent with them) is
// served under it at every stage: a read, a listing, a write and a stat
// outside the narrowed subtree are PERMISSION_DENIED and nothing is
// written; the same corridor serves a request without it under the roots
// as they are, at the same time.
func TestRequestRootsNarrowOnlyTheirRequest(t *testing.T) {
	f := newFixture(t)
	host := hostSubtree(t, f)
	c := f.corridor(t, WithDecider(defaultDecider(t)), WithoutAuditTrail())
	plain := context.Background()
	narrowed := WithRequestRoots(plain, func(op *roots.Set) *roots.Set { return roots.Intersect(op, host) })

	if r, err := c.Read(narrowed, f.caller, ReadRequest{Path: "rw/sub/in.txt", Length: -1}); err != nil || string(r.Data) != "in\n" {
		t.Fatalf("read inside the request's roots: %q, %v", r.Data, err)
	}
	if r, err := c.Read(plain, f.caller, ReadRequest{Path: "rw/other.txt", Length: -1}); err != nil || string(r.Data) != "other\n" {
		t.Fatalf("a request without narrowing, outside the other's roots: %q, %v", r.Data, err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if errcode.Of(err) != errcode.PermissionDenied {
			t.Errorf("%s under the request's roots: %v, want PERMISSION_DENIED", what, err)
		}
	}
	_, err := c.Read(narrowed, f.caller, ReadRequest{Path: "rw/other.txt", Length: -1})
	refused("read outside", err)
	_, err = c.List(narrowed, f.caller, ListRequest{Path: "rw", MaxDepth: -1, Limit: 100})
	refused("listing of the whole root", err)
	_, err = c.Stat(narrowed, f.caller, StatRequest{Path: "ro/a.txt"})
	refused("stat of the other root", err)
	_, err = c.Write(narrowed, f.caller, WriteRequest{Path: "rw/planted.txt", Data: []byte("x"), Create: true, Final: true})
	refused("write outside", err)
	if _, err := os.Lstat(filepath.Join(f.rw, "planted.txt")); !os.IsNotExist(err) {
		t.Errorf("a refused write touched the root (%v)", err)
	}
	if got := RequestRoots(narrowed, c.roots()).Dirs(); len(got) != 1 || got[0] != filepath.Join(f.rw, "sub") {
		t.Errorf("RequestRoots under the narrowing: %q", got)
	}
	if got := RequestRoots(plain, c.roots()).Len(); got != c.roots().Len() {
		t.Errorf("RequestRoots without narrowing: %d roots, want %d", got, c.roots().Len())
	}
}

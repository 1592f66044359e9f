// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// TestEntryInputPathsMatchnewInputPath: the batch built for the visibility
// decision describes each entry as newInputPath describes a resolved path.
func TestEntryInputPathsMatchnewInputPath(t *testing.T) {
	rootAt := func(path, mount string, writable bool) roots.Root {
		return roots.Root{Mount: mount, Name: mount, Path: path, URI: "file://" + path, Writable: writable}
	}
	r1, r2 := rootAt("/home/u/proj", "proj", true), rootAt("/", "slash", false)
	var entries []executor.Entry
	for _, r := range []roots.Root{r1, r2} {
		for _, rel := range []string{"", "a", "a/b.txt", ".env", "a/.git/config", "a.b/c", "x/y.z/.w", "dir"} {
			for _, typ := range []string{executor.TypeFile, executor.TypeDirectory, executor.TypeSymlink} {
				entries = append(entries, executor.Entry{Path: canon.Path{Root: r, Rel: rel}, Name: filepath.Base(rel),
					Type: typ, Size: int64(len(rel)) - 3, Modified: time.Unix(1, 0)})
			}
		}
	}
	got := entryInputPaths(entries)
	if len(got) != len(entries) {
		t.Fatalf("%d input paths for %d entries", len(got), len(entries))
	}
	for i, e := range entries {
		want := newInputPath(e.Path.MountPath(), executor.Target{Path: e.Path, Exists: true,
			Info: executor.Info{Type: e.Type, Size: e.Size}})
		if got[i] != want {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, got[i], want)
		}
	}
	if len(entryInputPaths(nil)) != 0 {
		t.Error("input paths out of no entries")
	}
}

// TestIsHidden: a path is hidden when any of its segments starts with a dot,
// and only then (a dot inside or at the end of a segment does not count).
func TestIsHidden(t *testing.T) {
	for rel, want := range map[string]bool{
		"": false, "a": false, "a.b": false, "a./b": false, "a/b.": false, "a/b/c.txt": false,
		".a": true, ".": true, "a/.b": true, "a/b/.c/d": true, ".git/config": true,
	} {
		if got := isHidden(rel); got != want {
			t.Errorf("isHidden(%q) = %v, want %v", rel, got, want)
		}
	}
}

// paramsCases are params with content where a scan could go wrong.
var paramsCases = []string{
	`{"path":"a.txt","content":"hello"}`,
	`{"content":"x","path":"a"}`,
	`{ "path" : "a" , "content" : "q\"uo}te\\" , "offset" : 3 }`,
	`{"cont\u0065nt":"escaped key","path":"a"}`,
	`{"content":"one","content":"two","path":"a"}`,
	`{"path":"a","nested":{"content":"kept: not top level","arr":[1,{"x":"]}"}]}}`,
	`{"content":{"not":"a string"},"flag":true,"n":null,"f":-1.5e3}`,
	`{}`, `{"content":"only"}`, `[]`, `"str"`, `{"path":"a",}`, `{"path":"a"`, ``, `{"a":"\\"}`,
}

// TestParamsWithoutContentMatchesDecoding: skipping the content by scanning
// gives the policy the same params as decoding them whole and deleting it.
func TestParamsWithoutContentMatchesDecoding(t *testing.T) {
	for _, raw := range paramsCases {
		if !json.Valid([]byte(raw)) {
			continue // never reaches the policy input: the message was refused
		}
		if got, want := paramsWithoutContent([]byte(raw)), decodedWithoutContent(raw); !reflect.DeepEqual(decodedWithoutContent(string(got)), want) {
			t.Errorf("params %s: got %s, want %v", raw, got, want)
		}
	}
}

// FuzzParamsWithoutContent compares the scan with decoding on any valid
// JSON (params reach the policy input only from a decoded message).
func FuzzParamsWithoutContent(f *testing.F) {
	for _, raw := range paramsCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		got := paramsWithoutContent(raw)
		if got != nil && (!json.Valid(got) || len(got) <= 2) {
			t.Fatalf("params %q: got %q, want nil or a JSON object with members", raw, got)
		}
		if want := decodedWithoutContent(string(raw)); !reflect.DeepEqual(decodedWithoutContent(string(got)), want) {
			t.Fatalf("params %q: got %s, want %v", raw, got, want)
		}
	})
}

// decodedWithoutContent is what the policy's params are by definition:
// the params decoded whole, without their content member ({} for nil or
// anything but an object, as the policy sees no params member then).
func decodedWithoutContent(raw string) map[string]any {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal([]byte(raw), &m) != nil || m == nil {
		return map[string]any{}
	}
	delete(m, "content")
	return m
}

// TestDailyCounterStartsAgainAtMidnight: the session's write count is per UTC day.
func TestDailyCounterStartsAgainAtMidnight(t *testing.T) {
	var c dailyCounter
	day := time.Date(2026, 11, 22, 23, 59, 0, 0, time.UTC)
	c.add(day, 100)
	c.add(day, 20)
	if got := c.today(day); got != 120 {
		t.Errorf("today = %d, want 120", got)
	}
	if got := c.today(day.Add(2 * time.Minute)); got != 0 {
		t.Errorf("after midnight = %d, want 0", got)
	}
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/corridor"
)

// listEntry and listResult are a files/list result as encoding/json writes it
// (docs/protocol.md section 5): what listReply must match byte for byte, and
// what BenchmarkFilesList1000's raw case encodes.
type listEntry struct {
	Path     string `json:"path"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Size     int64  `json:"size"`
	Modified string `json:"modified"`
}

type listResult struct {
	Entries    []listEntry `json:"entries"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// TestListReplyMatchesEncodingJSON: a files/list result is the JSON
// encoding/json writes for the same fields: with no entries, with names
// that JSON escapes (HTML characters, a quote, a control character, invalid
// UTF-8, U+2028), with times in other zones and with and without
// fractions of a second, with and without a next cursor.
func TestListReplyMatchesEncodingJSON(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	entries := []corridor.ListEntry{
		{Path: "ro/a.txt", Name: "a.txt", Type: "file", Size: 12, Modified: time.Date(2026, 11, 22, 10, 4, 5, 0, time.UTC)},
		{Path: "ro/<b>&\"c\"\n", Name: "<b>&\"c\"\n", Type: "directory", Size: 0,
			Modified: time.Date(2026, 1, 2, 3, 4, 5, 123456789, east)},
		{Path: "ro/\xff\u2028x", Name: "\xff\u2028x", Type: "symlink", Size: -1,
			Modified: time.Date(1969, 12, 31, 23, 59, 59, 120000000, time.Local)},
		{Path: "ro/z", Name: "z", Type: "other", Size: 1 << 40},
	}
	for _, tc := range []listReply{
		{entries: []corridor.ListEntry{}},
		{entries: nil, nextCursor: "c1"},
		{entries: entries},
		{entries: entries, nextCursor: "next <page>"},
	} {
		plain := listResult{Entries: make([]listEntry, 0, len(tc.entries)), NextCursor: tc.nextCursor}
		for _, e := range tc.entries {
			plain.Entries = append(plain.Entries, listEntry{Path: e.Path, Name: e.Name, Type: e.Type, Size: e.Size,
				Modified: e.Modified.UTC().Format(time.RFC3339Nano)})
		}
		want, err := json.Marshal(plain)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(&tc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("listReply encodes as\n%s\nwant\n%s", got, want)
		}
	}
}

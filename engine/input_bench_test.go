// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/decision"
)

// benchPath is a typical resolved path of a policy input.
var benchPath = decision.InputPath{Requested: "proj/src/pkg/main.go", Canonical: "/home/u/proj/src/pkg/main.go", Root: "/home/u/proj",
	Mount: "proj", Relative: "src/pkg/main.go", MountPath: "proj/src/pkg/main.go", Writable: true, Exists: true,
	Type: "file", Size: 4096, Nlink: 1}

// BenchmarkEncodeInput is the cost of encoding a files/read's policy input (two
// grants), and a visibility batch of 1,000 listed entries.
func BenchmarkEncodeInput(b *testing.B) {
	in := decision.Input{Version: 1, Method: "files/read", Operation: "read",
		Server:  decision.InputServer{ID: "declared:example", Name: "example", Version: "1.0.0"},
		Session: decision.InputSession{ID: "s1", ProtocolVersion: "2025-06-18", Transport: "stdio"},
		Path:    &benchPath, Params: json.RawMessage(`{"path":"proj/src/pkg/main.go","offset":0,"length":1048576}`),
		Grants: []decision.InputGrant{{Access: "read", Path: "/home/u/proj/src", Granted: "2026-01-02T03:04:05Z"},
			{Access: "write", Path: "/home/u/proj/out", Granted: "2026-01-02T03:04:05Z"}},
		Time: decision.NewInputTime(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))}
	batch := in
	batch.Operation, batch.Path, batch.Params = "visible", nil, nil
	for i := range 1000 {
		p := benchPath
		p.Requested = fmt.Sprintf("proj/src/pkg%d/file%d.go", i%7, i)
		p.MountPath, p.Relative, p.Canonical = p.Requested, p.Requested[len("proj/"):], "/home/u/"+p.Requested
		batch.Entries = append(batch.Entries, p)
	}
	for _, tc := range []struct {
		name string
		in   *decision.Input
	}{{"read", &in}, {"visible1000", &batch}} {
		b.Run(tc.name, func(b *testing.B) {
			doc, _ := encodeInput(tc.in)
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				encodeInput(tc.in)
			}
		})
	}
}

package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchPath is a typical resolved path of a policy input.
var benchPath = InputPath{Requested: "proj/src/pkg/main.go", Canonical: "/home/u/proj/src/pkg/main.go", Root: "/home/u/proj",
	Mount: "proj", Relative: "src/pkg/main.go", MountPath: "proj/src/pkg/main.go", Writable: true, Exists: true,
	Type: "file", Size: 4096, Nlink: 1}

// BenchmarkPolicyInputAppendJSON is the cost of encoding a files/read's policy input (two
// grants), and a visibility batch of 1,000 listed entries.
func BenchmarkPolicyInputAppendJSON(b *testing.B) {
	in := PolicyInput{Version: 1, Method: "files/read", Operation: "read",
		Server:  InputServer{ID: "declared:example", Name: "example", Version: "1.0.0"},
		Session: InputSession{ID: "s1", ProtocolVersion: "2025-06-18", Transport: "stdio"},
		Path:    &benchPath, Params: json.RawMessage(`{"path":"proj/src/pkg/main.go","offset":0,"length":1048576}`),
		Grants: []InputGrant{{Access: "read", Path: "/home/u/proj/src", Granted: "2026-01-02T03:04:05Z"},
			{Access: "write", Path: "/home/u/proj/out", Granted: "2026-01-02T03:04:05Z"}},
		Time: NewInputTime(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))}
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
		in   *PolicyInput
	}{{"read", &in}, {"visible1000", &batch}} {
		b.Run(tc.name, func(b *testing.B) {
			buf, err := tc.in.appendJSON(nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = tc.in.appendJSON(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadReplyAppendJSON is the cost of encoding a files/read result of 4 KiB and of
// 1 MiB of text, and of 1 MiB as base64.
func BenchmarkReadReplyAppendJSON(b *testing.B) {
	text := []byte(strings.Repeat("The quick brown fox <jumps> over the \"lazy\" dog.\n", 1<<20/49+1)[:1<<20])
	for _, tc := range []struct {
		name  string
		reply readReply
	}{
		{"utf-8/4KiB", readReply{data: text[:4096], encoding: "utf-8", size: 4096, eof: true, mimeType: "text/plain; charset=utf-8", etag: "e1"}},
		{"utf-8/1MiB", readReply{data: text, encoding: "utf-8", size: 1 << 20, eof: true, mimeType: "text/plain; charset=utf-8", etag: "e1"}},
		{"base64/1MiB", readReply{data: text, encoding: "base64", size: 1 << 20, eof: true, mimeType: "application/octet-stream", etag: "e1"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := tc.reply.AppendJSON(nil)
			b.SetBytes(int64(len(tc.reply.data)))
			b.ReportAllocs()
			for b.Loop() {
				buf = tc.reply.AppendJSON(buf[:0])
			}
		})
	}
}

// BenchmarkParamsWithoutContent is the cost of cutting the content out of a files/write's
// params (4 KiB of content) for the policy input.
func BenchmarkParamsWithoutContent(b *testing.B) {
	params := json.RawMessage(`{"path":"proj/src/pkg/main.go","content":"` + strings.Repeat(`x\"y\\z `, 4096/7) + `","encoding":"utf-8","offset":0,"final":true}`)
	b.SetBytes(int64(len(params)))
	b.ReportAllocs()
	for b.Loop() {
		if paramsWithoutContent(params) == nil {
			b.Fatal("no params")
		}
	}
}

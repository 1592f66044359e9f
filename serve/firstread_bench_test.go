// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/runtime"
	"github.com/fsbroker/fsbroker/internal/cputime"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// firstReadContent is every file's content in the first-read benchmark: 1
// KiB of text, as fsbench's serve-read-1k reads.
var firstReadContent = bytes.Repeat([]byte("0123456789abcde\n"), 64)

// firstReadHost is the host's side of a serve session on a tree of 1 KiB
// files, for BenchmarkServeReadFirstTouch: a real Session in the process, on
// a real runtime (the built-in policies, the audit trail in its default
// batch mode, grants and usage in a state directory) with one writable,
// pre-approved root, as fsbench's serve workloads configure fsbroker serve,
// over real pipes.
type firstReadHost struct {
	stream  *jsonrpc.LineStream
	proj    string // the root's host path
	result  []byte // every reply's result: the file's text, as the reference writes it
	request []byte // the last request made (reused: the host's own garbage would be the collector's too)
}

// path is the host path of the i-th file.
func (h *firstReadHost) path(i int) string {
	return filepath.Join(h.proj, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%06d.txt", i))
}

// startFirstReadHost makes n files (a hundred to a directory) and starts the
// session, initialized as fsbench's host initializes it.
func startFirstReadHost(b *testing.B, n int) *firstReadHost {
	b.Helper()
	base, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	proj := filepath.Join(base, "proj")
	h := &firstReadHost{proj: proj}
	for i := range n {
		p := h.path(i)
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, firstReadContent, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	log := &testlog.Lines{}
	rt, err := runtime.Open(context.Background(), runtime.Config{StateDir: filepath.Join(base, "state"), Version: "bench",
		Roots: []roots.Spec{{Path: proj, Mount: "proj", Writable: true, Preapproved: true}}}, log.Logger())
	if err != nil {
		b.Fatal(err)
	}
	brokerEnd, hostEnd := mcppeer.Pipes(b)
	limits := rt.Limits()
	sess, err := NewSession(brokerEnd, Config{Corridor: rt.NewCorridor(), Roots: rt.Roots, Log: log.Logger(), Version: "bench",
		MaxReadBytes: limits.MaxReadBytes, WatchGrants: rt.WatchGrants,
		ConnOptions: []jsonrpc.Option{jsonrpc.WithMaxInFlight(limits.MaxInFlight), jsonrpc.WithShutdownTimeout(limits.ShutdownTimeout)}})
	if err != nil {
		b.Fatal(err)
	}
	runPipeSession(b, sess, hostEnd, rt)
	h.stream = hostEnd
	h.send(b, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":`+testClientInit+`}`))
	if reply := h.receive(b); !bytes.Contains(reply, []byte(`"protocolVersion"`)) {
		b.Fatalf("initialize: %s", reply)
	}
	h.send(b, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if h.result, err = json.Marshal(TextResult(string(firstReadContent))); err != nil {
		b.Fatal(err)
	}
	return h
}

// sendRequest sends the tools/call read_text_file of the i-th file, with id
// i+1.
func (h *firstReadHost) sendRequest(b *testing.B, i int) {
	h.request = fmt.Appendf(h.request[:0], `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_text_file",`+
		`"arguments":{"path":"%s/d%03d/f%06d.txt"}}}`, i+1, h.proj, i/100, i)
	h.send(b, h.request)
}

// send writes one message to the session.
func (h *firstReadHost) send(b *testing.B, msg []byte) {
	if err := h.stream.Write(msg); err != nil {
		b.Fatal(err)
	}
}

// receive reads the session's next message.
func (h *firstReadHost) receive(b *testing.B) []byte {
	reply, err := h.stream.Read()
	if err != nil {
		b.Fatal(err)
	}
	return reply
}

// check fails the benchmark unless reply is the reply to some request with
// the file's text as its result, byte for byte; it returns the reply's id.
func (h *firstReadHost) check(b *testing.B, reply []byte) int {
	const head = `{"jsonrpc":"2.0","id":`
	rest, ok := bytes.CutPrefix(reply, []byte(head))
	comma := bytes.IndexByte(rest, ',')
	if ok && comma > 0 {
		id, err := strconv.Atoi(string(rest[:comma]))
		body, _ := bytes.CutPrefix(rest[comma:], []byte(`,"result":`))
		if err == nil && len(body) == len(h.result)+1 && bytes.Equal(body[:len(h.result)], h.result) && body[len(h.result)] == '}' {
			return id
		}
	}
	b.Fatalf("not the file's text: %s", reply)
	return 0
}

// BenchmarkServeReadFirstTouch is fsbench's serve-read-1k in the process:
// the host's tools/call read_text_file of a 1 KiB file no earlier iteration
// read, through everything fsbroker serve runs for it (the JSON-RPC reading
// and dispatch, the arguments' decoding and validation, the corridor with
// the built-in policies and the audit trail's two records, the executor's
// confined read, the result's encoding and the reply's write). "sequential"
// sends each request once the reply to the one before has come; "8-in-flight"
// keeps eight requests outstanding. Besides ns/op it reports cpu-ns/op: the
// CPU time of the whole process per read, every thread included (the host's
// side of the pipes too, which only writes each request and compares the
// reply with the text expected, and keeps nothing per request: the
// collector's work is the session's). Run it with the collector set as the
// broker sets it: GOGC=400 GOMEMLIMIT=36MiB (docs/performance.md).
func BenchmarkServeReadFirstTouch(b *testing.B) {
	for _, inFlight := range []int{1, 8} {
		name := "sequential"
		if inFlight > 1 {
			name = fmt.Sprintf("%d-in-flight", inFlight)
		}
		b.Run(name, func(b *testing.B) {
			h := startFirstReadHost(b, b.N)
			seen := make([]bool, b.N+1)
			b.ReportAllocs()
			cpu0, haveCPU := cputime.Process()
			b.ResetTimer()
			sent := 0
			for received := range b.N {
				for sent < b.N && sent-received < inFlight {
					h.sendRequest(b, sent)
					sent++
				}
				id := h.check(b, h.receive(b))
				if id < 1 || id > b.N || seen[id] {
					b.Fatalf("reply to request %d, unexpected", id)
				}
				seen[id] = true
			}
			b.StopTimer()
			if cpu1, _ := cputime.Process(); haveCPU {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

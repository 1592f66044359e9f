// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChunkedRunRemovesItsFile runs only the chunked workload, keeping the
// work directory, and checks both halves against both targets and that the
// file (and any temporary file) is gone afterwards.
func TestChunkedRunRemovesItsFile(t *testing.T) {
	cfg := tinyConfig(t, "baseline,fsbroker")
	cfg.workloads = "chunked"
	cfg.keep = true
	rep, err := run(cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Workload+"/"+r.Target)
		if !r.ok() || r.Errors > 0 || r.Requests != 5 {
			t.Errorf("%s, %s: %d chunks, %d errors (%s), skipped %q", r.Title, r.Target, r.Requests, r.Errors, r.FirstError, r.Skipped)
		}
	}
	if want := "chunked-write/baseline,chunked-write/fsbroker,chunked-read/baseline,chunked-read/fsbroker"; strings.Join(got, ",") != want {
		t.Errorf("rows %s, want %s", strings.Join(got, ","), want)
	}
	var budget *budget
	for i, b := range rep.Budgets {
		if strings.Contains(b.Budget, "chunks: peak RSS") {
			budget = &rep.Budgets[i]
		}
	}
	if budget == nil || budget.Met == nil || !strings.Contains(budget.Budget, "300 KiB written and read in 64 KiB chunks") {
		t.Errorf("no measured chunked budget line: %+v", rep.Budgets)
	}
	left, err := filepath.Glob(filepath.Join(cfg.dir, "data", "chunked", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	if dirs, _ := os.ReadDir(filepath.Join(cfg.dir, "data", "chunked")); len(dirs) > 0 {
		t.Errorf("%d run directories left behind", len(dirs))
	}
}

// TestChunkedNotForTS: the MCP filesystem servers (the TypeScript one,
// mark3labs') have no chunked reads or writes; their rows say so without
// starting them.
func TestChunkedNotForTS(t *testing.T) {
	cfg := tinyConfig(t, "ts,mark3labs")
	cfg.ts, cfg.mark3labs = "/no/such/program", "/no/such/program"
	b := &bench{cfg: cfg, tree: &tree{root: t.TempDir()}}
	for _, name := range []string{"ts", "mark3labs"} {
		rows := b.runChunked(newTarget(cfg, name), workload{key: "chunked", kind: "chunked"})
		if len(rows) != chunkedRows {
			t.Fatalf("%s: %d rows", name, len(rows))
		}
		for _, r := range rows {
			if !strings.HasPrefix(r.Skipped, "n/a") {
				t.Errorf("%s, %s: skipped %q, want n/a", name, r.Workload, r.Skipped)
			}
		}
	}
}

// readResult is a files/read result of the chunk of o at k with content.
func readResult(t *testing.T, o *chunkedOp, k int, content string) []byte {
	t.Helper()
	off, n := o.span(k)
	b, err := json.Marshal(map[string]any{"content": content, "encoding": "utf-8", "size": o.size, "offset": off,
		"length": n, "eof": off+n >= o.size, "mimeType": "text/plain", "etag": "x"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChunkedChecks: the checks accept the right replies, skimmed or decoded,
// and refuse a chunk from the wrong offset, a wrong eof and a wrong size.
func TestChunkedChecks(t *testing.T) {
	o := newChunkedOp("data/c/file.txt", 1000, 300) // 300, 300, 300, 100
	if o.chunks() != 4 {
		t.Fatalf("%d chunks", o.chunks())
	}
	var whole []byte
	for k := range o.chunks() {
		whole = append(whole, o.content(k)...)
	}
	if len(whole) != 1000 || !strings.HasPrefix(string(whole[300:]), "chunk 1, written") {
		t.Fatalf("content %d bytes: %.80q", len(whole), whole[300:])
	}
	for k := range o.chunks() {
		res := readResult(t, o, k, string(o.content(k)))
		for _, full := range []bool{true, false} {
			if err := o.checkRead(k, res, full); err != nil {
				t.Errorf("chunk %d (full %v): %v", k, full, err)
			}
		}
	}
	wrong := readResult(t, o, 1, string(o.content(2)))
	for _, full := range []bool{true, false} {
		if err := o.checkRead(1, wrong, full); err == nil {
			t.Errorf("chunk 2's content taken for chunk 1 (full %v)", full)
		}
	}
	noEOF := strings.Replace(string(readResult(t, o, 3, string(o.content(3)))), `"eof":true`, `"eof":false`, 1)
	if err := o.checkRead(3, []byte(noEOF), false); err == nil {
		t.Error("the last chunk without eof accepted")
	}
	// A target that escapes differently (\u000a for a newline) still passes.
	other := strings.ReplaceAll(string(readResult(t, o, 0, string(o.content(0)))), `\n`, `\u000a`)
	if err := o.checkRead(0, []byte(other), false); err != nil {
		t.Errorf("the same content escaped otherwise: %v", err)
	}

	if err := o.checkWrite(1, []byte(`{"path":"data/c/file.txt","size":600,"etag":"","created":false}`), false); err != nil {
		t.Error(err)
	}
	if err := o.checkWrite(1, []byte(`{"path":"data/c/file.txt","size":300,"etag":"","created":false}`), false); err == nil {
		t.Error("a staged size that does not follow accepted")
	}
	if err := o.checkWrite(3, []byte(`{"path":"data/c/file.txt","size":1000,"etag":"","created":true}`), false); err == nil {
		t.Error("the final chunk without an etag accepted")
	}

	// The write request carries the chunk's offset, final and content.
	var req struct {
		ID     int64 `json:"id"`
		Params struct {
			Path    string `json:"path"`
			Offset  int64  `json:"offset"`
			Final   bool   `json:"final"`
			Content string `json:"content"`
		} `json:"params"`
	}
	line := o.writeReq(nil, 7, 3)
	if err := json.Unmarshal(line, &req); err != nil || !strings.HasSuffix(string(line), "\n") {
		t.Fatalf("%v: %.200s", err, line)
	}
	if req.ID != 7 || req.Params.Offset != 900 || !req.Params.Final || req.Params.Content != string(whole[900:]) || req.Params.Path != "data/c/file.txt" {
		t.Errorf("request %+v", req)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1234": 1234, "64K": 64 << 10, "64KiB": 64 << 10, "1M": 1 << 20,
		"1G": 1 << 30, "2GiB": 2 << 30, "10B": 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "K", "1.5G", "-1", "1T", "9999999999G"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if sizeName(int64(1<<30)) != "1 GiB" || sizeName(300<<10) != "300 KiB" {
		t.Error("sizeName")
	}
	if i := strings.IndexByte(string(textOfSize(200)), '\n'); i != lineLen-1 {
		t.Errorf("textOfSize's first line ends at %d, want lineLen-1 = %d", i, lineLen-1)
	}
}

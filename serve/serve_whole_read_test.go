// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package serve

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// peakRSS is the most memory the process pid has held (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestServeWholeFileReadsAreBounded: through the real fsbroker serve, a
// tool or resources/read that reads a file whole refuses a file over the
// write limit (--max-write-bytes, here 1 MiB) with QUOTA_EXCEEDED, from
// the size its first chunk reports, so that a large (here sparse, 64 MiB)
// file in a root never takes the process's memory: read_text_file,
// read_media_file, edit_file, resources/read; its peak memory grows by
// far less than the file. read_multiple_files is bounded in total: a file
// over what the files before it left is refused in its place, and the
// others are read. A file under the limit is read whole, in chunks of
// --max-read-bytes. Each refusal is in the trail.
func TestServeWholeFileReadsAreBounded(t *testing.T) {
	base := t.TempDir()
	ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(ws, "big.txt")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	near := strings.Repeat("near the limit\n", 700<<10/15)
	for name, content := range map[string]string{"near.txt": near, "near2.txt": near, "small.txt": "small\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(brokerBinary(t), "serve", "--state-dir", state, "--log-level", "warn", "--root", ws+":rw",
		"--consent", "auto", "--max-read-bytes", "65536", "--max-write-bytes", "1048576")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stderr = os.Stderr
	p := startServerAs(t, "fsbroker serve", cmd, testClientInit)

	if text := resultText(p.call(ToolReadTextFile, map[string]any{"path": filepath.Join(ws, "near.txt")})); text != near {
		t.Fatalf("near.txt read whole: %d bytes, want its %d", len(text), len(near))
	}
	before := peakRSS(t, cmd.Process.Pid)
	const quota = "QUOTA_EXCEEDED: "
	requireRefused(t, p.call(ToolReadTextFile, map[string]any{"path": big}), quota)
	requireRefused(t, p.call(ToolReadMediaFile, map[string]any{"path": big}), quota)
	requireRefused(t, p.call(ToolEditFile, map[string]any{"path": big, "edits": []any{map[string]any{"oldText": "a", "newText": "b"}}}), quota)
	params, _ := json.Marshal(map[string]string{"uri": "file://" + big})
	if resp := p.request("resources/read", params); resp.Error == nil || resp.Error.Code != errcode.QuotaExceeded.RPC() {
		t.Errorf("resources/read of big.txt: %+v, want the error %d (QUOTA_EXCEEDED)", resp, errcode.QuotaExceeded.RPC())
	}
	if grown := peakRSS(t, cmd.Process.Pid) - before; grown > 16<<20 {
		t.Errorf("reading a 64 MiB file took the peak memory up %d MiB", grown>>20)
	}

	multi := resultText(p.call(ToolReadMultipleFiles, map[string]any{"paths": []any{
		filepath.Join(ws, "near.txt"), filepath.Join(ws, "near2.txt"), filepath.Join(ws, "small.txt"), big}}))
	for _, want := range []string{filepath.Join(ws, "near.txt") + ":\n" + near, filepath.Join(ws, "near2.txt") + ": Error - " + quota,
		filepath.Join(ws, "small.txt") + ":\nsmall\n", big + ": Error - " + quota} {
		if !strings.Contains(multi, want) {
			t.Errorf("read_multiple_files does not hold %.80q", want)
		}
	}
	at := attackTree{state: state}
	for _, tool := range []string{ToolReadTextFile, ToolReadMediaFile, ToolEditFile, MethodResourcesRead, ToolReadMultipleFiles} {
		at.refusedRecord(t, tool, "bytes")
	}
}

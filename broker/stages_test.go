// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// tempFiles returns the names of the broker's temporary files in dir.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := executor.TempFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// tempFileCensus follows the broker's temporary files in one directory as
// the kernel reports them created and removed, and records the most that
// existed at any moment. Events of one directory come in the order they
// happened, so the count is exact, however briefly a file lived.
type tempFileCensus struct {
	t     testing.TB
	dir   string
	w     *fsnotify.Watcher
	ended chan struct{}

	// Written by the census goroutine only, read after ended is closed.
	live map[string]bool
	most int
	err  error
}

// censusEnd is the name of the file that tells the census it has seen every
// earlier event.
const censusEnd = "census-end"

func startTempFileCensus(t testing.TB, dir string) *tempFileCensus {
	t.Helper()
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		t.Fatal(err)
	}
	c := &tempFileCensus{t: t, dir: dir, w: w, ended: make(chan struct{}), live: map[string]bool{}}
	for _, name := range tempFiles(t, dir) {
		c.live[name] = true
	}
	c.most = len(c.live)
	go c.follow()
	return c
}

func (c *tempFileCensus) follow() {
	defer close(c.ended)
	for {
		select {
		case ev, ok := <-c.w.Events:
			if !ok {
				return
			}
			name := filepath.Base(ev.Name)
			switch {
			case name == censusEnd && ev.Has(fsnotify.Create):
				return
			case !executor.IsTempName(name):
			case ev.Has(fsnotify.Create):
				c.live[name] = true
				c.most = max(c.most, len(c.live))
			case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
				delete(c.live, name)
			}
		case err, ok := <-c.w.Errors:
			if ok && c.err == nil {
				c.err = err // an overflow: the count is no longer exact
			}
		}
	}
}

// finish waits for every event so far and returns the most temporary files
// seen at once and those still there.
func (c *tempFileCensus) finish() (most int, left []string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, censusEnd), nil, 0o644); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-c.ended:
	case <-time.After(wait):
		c.t.Fatal("the census did not see its end marker")
	}
	_ = c.w.Close()
	if c.err != nil {
		c.t.Fatalf("the census lost events: %v", c.err)
	}
	for name := range c.live {
		left = append(left, name)
	}
	return c.most, left
}

// writeTogether sends one files/write per params in a single write, so the
// broker reads them at once and handles them concurrently, and returns the
// replies in the order of params.
func (f *filesFixture) writeTogether(params []map[string]any) []*mcppeer.Message {
	f.t.Helper()
	block := make([]string, len(params))
	ids := make(map[string]int, len(params))
	for i, p := range params {
		id := f.next.Add(1)
		b, err := json.Marshal(p)
		if err != nil {
			f.t.Fatal(err)
		}
		block[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"files/write","params":%s}`, id, b)
		ids[fmt.Sprint(id)] = i
	}
	if err := f.writeBlock(block); err != nil {
		f.t.Fatal(err)
	}
	replies := make([]*mcppeer.Message, len(params))
	for got := 0; got < len(params); {
		m := f.Next()
		i, ok := ids[string(m.ID)]
		if !ok || m.Method != "" {
			continue // a notification or request of the broker's
		}
		if replies[i] != nil {
			f.t.Fatalf("two replies to id %s", m.ID)
		}
		replies[i] = m
		got++
	}
	return replies
}

// stagedOrQuota sorts the replies to first chunks: each must be a staged
// write (its size the chunk's) or QUOTA_EXCEEDED. It returns the indexes of
// the staged ones.
func stagedOrQuota(t *testing.T, replies []*mcppeer.Message, size int) (staged []int) {
	t.Helper()
	for i, r := range replies {
		if r.Error != nil {
			if code, dc, data := errorOf(t, r); dc != "QUOTA_EXCEEDED" {
				t.Errorf("first chunk %d: error %d %v, want a staged write or QUOTA_EXCEEDED", i, code, data)
			}
			continue
		}
		var res writeResult
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		if res.Size != int64(size) || res.ETag != "" {
			t.Errorf("first chunk %d: result %+v, want size %d and no etag", i, res, size)
		}
		staged = append(staged, i)
	}
	return staged
}

// endSession closes the server's side of the session and waits for it to
// end.
func (f *filesFixture) endSession() {
	f.t.Helper()
	f.endInput()
	select {
	case err := <-f.ran:
		f.ran <- err
	case <-time.After(wait):
		f.t.Fatal("the session did not end")
	}
}

// endSessionWithinTheLimit ends the session and checks that census never saw
// more temporary files than the limit of staged writes, and sees none now.
func endSessionWithinTheLimit(f *filesFixture, census *tempFileCensus) {
	f.t.Helper()
	f.endSession()
	most, left := census.finish()
	if most > corridor.MaxStagedWrites {
		f.t.Errorf("%d temporary files existed at once, over the limit of %d staged writes", most, corridor.MaxStagedWrites)
	}
	if len(left) != 0 || len(tempFiles(f.t, f.rw)) != 0 {
		f.t.Errorf("temporary files left after the session ended: %v", left)
	}
}

// floodRequests is how many first chunks a flood sends at once: the
// broker's default bound on requests in flight, so all run together.
const floodRequests = 64

// TestStagedWriteFloodOfFirstChunksForOnePath: first chunks of one path sent
// together replace one another: each replaced stage is aborted, so one
// temporary file is left after each burst, never more than the per-session
// limit at once, and none once the session has ended.
func TestStagedWriteFloodOfFirstChunksForOnePath(t *testing.T) {
	f := startFiles(t)
	census := startTempFileCensus(t, f.rw)
	const rounds = 5
	for round := range rounds {
		params := make([]map[string]any, floodRequests)
		for i := range params {
			params[i] = map[string]any{"path": "rw/same.bin", "content": fmt.Sprintf("%02d", i), "final": false}
		}
		staged := stagedOrQuota(t, f.writeTogether(params), 2)
		if len(staged) == 0 {
			t.Fatalf("round %d: every first chunk was refused", round)
		}
		if left := tempFiles(t, f.rw); len(left) != 1 || f.sess.corridor.Stats().StagedWrites != 1 {
			t.Fatalf("round %d: %d temporary files and %d staged writes after the burst, want 1 and 1: %v",
				round, len(left), f.sess.corridor.Stats().StagedWrites, left)
		}
		if round == rounds-1 {
			break // the last one is left for the session's end
		}
		// The staged write left is one of the chunks that got an answer, whole.
		res, _, _ := f.call("files/write", map[string]any{"path": "rw/same.bin", "content": "!", "offset": 2})
		if res == nil || res["size"] != float64(3) {
			t.Fatalf("round %d: committing the staged write = %v", round, res)
		}
		b, err := os.ReadFile(filepath.Join(f.rw, "same.bin"))
		if err != nil {
			t.Fatal(err)
		}
		var committed int
		if _, err := fmt.Sscanf(string(b), "%02d!", &committed); err != nil || !slices.Contains(staged, committed) {
			t.Errorf("round %d: committed %q, not one of the staged chunks %v", round, b, staged)
		}
	}
	endSessionWithinTheLimit(f, census)
}

// TestStagedWriteFloodOfFirstChunksForManyPaths: first chunks of distinct
// paths sent together start at most the per-session limit of staged writes,
// and never hold more temporary files than that, even for a moment.
func TestStagedWriteFloodOfFirstChunksForManyPaths(t *testing.T) {
	f := startFiles(t)
	census := startTempFileCensus(t, f.rw)
	params := make([]map[string]any, floodRequests)
	for i := range params {
		params[i] = map[string]any{"content": "abc", "final": false}
	}
	const rounds = 4
	for round := range rounds {
		for i := range params {
			params[i]["path"] = fmt.Sprintf("rw/r%d-%02d.bin", round, i)
		}
		staged := stagedOrQuota(t, f.writeTogether(params), 3)
		if len(staged) != corridor.MaxStagedWrites {
			t.Errorf("round %d: %d first chunks staged, want the limit, %d", round, len(staged), corridor.MaxStagedWrites)
		}
		if left := tempFiles(t, f.rw); len(left) != len(staged) {
			t.Errorf("round %d: %d temporary files for %d staged writes", round, len(left), len(staged))
		}
		if round == rounds-1 {
			break // the last ones are left for the session's end
		}
		// The staged writes are whole: each commits, which frees its place.
		for _, i := range staged {
			res, _, _ := f.call("files/write", map[string]any{"path": params[i]["path"], "content": "d", "offset": 3})
			if res == nil || res["size"] != float64(4) {
				t.Errorf("round %d: committing %v = %v", round, params[i]["path"], res)
			}
		}
	}
	endSessionWithinTheLimit(f, census)
}

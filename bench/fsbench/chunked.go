// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// The chunked workload: one file of -chunked-size bytes written through
// chunked files/write requests of -chunk bytes (offset advancing, final false
// until the last chunk, which commits the file), then read back with
// files/read requests of offset and length -chunk, in one child, once: there
// is no warm-up, and -duration and -n do not apply. Each half is a row of its
// own (requests are chunks; latency, req/s and CPU per request are per
// chunk), with its own peak RSS: between the halves the child's high-water
// mark is reset (writing 5 to /proc/PID/clear_refs, Linux 4.0 and later);
// where that is refused, the read's figure is the whole run's.
//
// The content is textOfSize's ASCII text in 68-byte lines (cheap to make, one
// JSON escape per line, as source code has), the first line of each chunk
// naming the chunk, so that a chunk read from the wrong offset does not compare equal.
// Every reply is checked: a write's size (the bytes staged so far, then the
// whole file with its etag), a read's offset, length, size and eof (true on
// the last chunk only), and the read content against what was written.
//
// The file lives in a directory of its own under the served root, made for
// the run and removed after it, temporary files included, whatever happened.

// chunkedOp is one file written, then read back, chunk by chunk, over
// fsbroker's wire.
type chunkedOp struct {
	path  []byte // the file's path as the target names it, JSON-encoded
	size  int64  // the whole file
	chunk int64  // bytes per request

	base []byte // a whole chunk of text, before its first line is stamped
	raw  []byte // scratch: the current chunk's bytes
	esc  []byte // scratch: the same, JSON-escaped
}

// newChunkedOp returns the op for a file at path (as the target names it) of
// size bytes in chunks of chunk bytes.
func newChunkedOp(path string, size, chunk int64) *chunkedOp {
	p, err := json.Marshal(path)
	if err != nil {
		panic(err) // a string always encodes
	}
	return &chunkedOp{path: p, size: size, chunk: chunk, base: textOfSize(int(chunk))}
}

// chunks is the number of requests of each half.
func (o *chunkedOp) chunks() int { return int((o.size + o.chunk - 1) / o.chunk) }

// span returns the offset and length of chunk k.
func (o *chunkedOp) span(k int) (off, n int64) {
	off = int64(k) * o.chunk
	return off, min(o.chunk, o.size-off)
}

// content returns chunk k's bytes (valid until the next call): the base text
// with its first line naming the chunk.
func (o *chunkedOp) content(k int) []byte {
	_, n := o.span(k)
	o.raw = append(o.raw[:0], o.base[:n]...)
	head := fmt.Appendf(nil, "%-*.*s", lineLen-1, lineLen-1, "chunk "+strconv.Itoa(k)+", written in chunks and read back")
	copy(o.raw[:min(len(head), int(n))], head)
	return o.raw
}

// escaped returns chunk k's bytes as a JSON string, quotes included (valid
// until the next call).
func (o *chunkedOp) escaped(k int) []byte {
	o.esc = jsonx.AppendString(o.esc[:0], o.content(k))
	return o.esc
}

// final reports whether chunk k is the last one.
func (o *chunkedOp) final(k int) bool { return k == o.chunks()-1 }

// writeReq appends the files/write request of chunk k, with id, to buf.
func (o *chunkedOp) writeReq(buf []byte, id int64, k int) []byte {
	off, _ := o.span(k)
	buf = append(buf, requestPrefix...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, `,"method":"files/write","params":{"path":`...)
	buf = append(buf, o.path...)
	buf = append(buf, `,"offset":`...)
	buf = strconv.AppendInt(buf, off, 10)
	buf = append(buf, `,"final":`...)
	buf = strconv.AppendBool(buf, o.final(k))
	buf = append(buf, `,"content":`...)
	buf = append(buf, o.escaped(k)...)
	return append(buf, "}}\n"...)
}

// checkWrite checks the result of chunk k's write: the bytes staged so far
// before the last chunk, the whole file and its etag after it.
func (o *chunkedOp) checkWrite(k int, res []byte, full bool) error {
	off, n := o.span(k)
	want := off + n
	if full || o.final(k) {
		var r struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
			Etag string `json:"etag"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return fmt.Errorf("files/write result of chunk %d: %w", k, err)
		}
		if r.Size != want || r.Path == "" || o.final(k) && r.Etag == "" {
			return fmt.Errorf("files/write result of chunk %d: %.200s; want size %d (and an etag on the last chunk)", k, res, want)
		}
		return nil
	}
	if got := string(member(res, "size")); got != strconv.FormatInt(want, 10) {
		return fmt.Errorf("files/write result of chunk %d: size %s, want %d staged", k, got, want)
	}
	return nil
}

// readReq appends the files/read request of chunk k, with id, to buf.
func (o *chunkedOp) readReq(buf []byte, id int64, k int) []byte {
	off, _ := o.span(k)
	buf = append(buf, requestPrefix...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, `,"method":"files/read","params":{"path":`...)
	buf = append(buf, o.path...)
	buf = append(buf, `,"offset":`...)
	buf = strconv.AppendInt(buf, off, 10)
	buf = append(buf, `,"length":`...)
	buf = strconv.AppendInt(buf, o.chunk, 10)
	return append(buf, "}}\n"...)
}

// checkRead checks the result of chunk k's read: its offset, length, the
// file's size, eof on the last chunk only, and the content against what was
// written (compared as the JSON text; decoded when that differs, in case the
// target escapes differently).
func (o *chunkedOp) checkRead(k int, res []byte, full bool) error {
	off, n := o.span(k)
	eof := off+n >= o.size
	want := o.escaped(k)
	if full {
		var r filesReadResult
		if err := json.Unmarshal(res, &r); err != nil {
			return fmt.Errorf("files/read result of chunk %d: %w", k, err)
		}
		if r.Content == nil || r.Encoding != "utf-8" || r.Size != o.size || r.Offset != off || r.Length != n || r.EOF != eof {
			return fmt.Errorf("files/read result of chunk %d: %.200s; want offset %d, length %d, size %d, eof %v",
				k, res, off, n, o.size, eof)
		}
		if *r.Content != string(o.content(k)) {
			return fmt.Errorf("files/read of chunk %d: the content is not what was written", k)
		}
		return nil
	}
	if string(member(res, "offset")) != strconv.FormatInt(off, 10) || string(member(res, "length")) != strconv.FormatInt(n, 10) ||
		string(member(res, "size")) != strconv.FormatInt(o.size, 10) || string(member(res, "eof")) != strconv.FormatBool(eof) {
		return fmt.Errorf("files/read result of chunk %d: offset %s, length %s, size %s, eof %s; want %d, %d, %d, %v", k,
			member(res, "offset"), member(res, "length"), member(res, "size"), member(res, "eof"), off, n, o.size, eof)
	}
	raw := member(res, "content")
	if bytes.Equal(raw, want) {
		return nil
	}
	var got string
	if err := json.Unmarshal(raw, &got); err != nil || got != string(o.content(k)) {
		return fmt.Errorf("files/read of chunk %d: the content is not what was written", k)
	}
	return nil
}

// resetPeakRSS resets the child's peak RSS (VmHWM) to its current RSS, by
// writing 5 to /proc/PID/clear_refs (Linux 4.0 and later).
func (c *child) resetPeakRSS() error {
	f, err := os.OpenFile("/proc/"+strconv.Itoa(c.cmd.Process.Pid)+"/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("resetting the peak RSS: %w", err)
	}
	_, err = f.WriteString("5")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("resetting the peak RSS: %w", err)
	}
	return nil
}

// chunkHalf sends one half of a chunked run, chunk by chunk: req appends
// chunk k's request, check checks its result. It stops at the first failed
// chunk (the next ones would not follow it); alive is called after every
// reply (it keeps the watchdog off while replies come).
func chunkHalf(c *child, chunks int, firstID int64, req func([]byte, int64, int) []byte,
	check func(int, []byte, bool) error, alive func()) (*runStats, error) {
	st := &runStats{}
	var buf []byte
	start := time.Now()
	for k := range chunks {
		id := firstID + int64(k)
		buf = req(buf[:0], id, k)
		t0 := time.Now()
		if err := c.send(buf); err != nil {
			return nil, fmt.Errorf("sending chunk %d: %w", k, err)
		}
		result, rpcErr, at, err := awaitReply(c, id)
		if err != nil {
			return nil, fmt.Errorf("awaiting the reply to chunk %d: %w", k, err)
		}
		alive()
		if err := checkReply(func(res []byte, full bool) error { return check(k, res, full) }, result, rpcErr, k == 0); err != nil {
			st.fail(fmt.Errorf("chunk %d of %d: %w", k+1, chunks, err))
			return st, nil
		}
		st.lat = append(st.lat, at.Sub(t0))
		st.elapsed = at.Sub(start)
	}
	return st, nil
}

// chunkedRows is the number of result rows of the chunked workload: the
// write and the read.
const chunkedRows = 2

// runChunked runs the chunked workload against tg in a fresh child and
// returns its two rows, the write's and the read's.
func (b *bench) runChunked(tg *target, w workload) []*result {
	size, chunk := b.cfg.chunkedSize, b.cfg.chunk
	rows := []*result{
		{Workload: w.key + "-write", Target: tg.name, PeakRSS: -1,
			Title: fmt.Sprintf("%s written in %s chunks (files/write)", sizeName(size), sizeName(chunk))},
		{Workload: w.key + "-read", Target: tg.name, PeakRSS: -1,
			Title: fmt.Sprintf("%s read in %s chunks (files/read)", sizeName(size), sizeName(chunk))},
	}
	skip := func(why string) []*result {
		for _, r := range rows {
			r.Skipped = why
		}
		return rows
	}
	if _, ok := tg.proto(w, b.tree.root).(filesProto); !ok {
		// The TypeScript server's write_file takes a whole file, and its
		// read_text_file reads lines from the head or the tail, not bytes
		// at an offset.
		return skip("n/a: no chunked reads or writes")
	}
	b.runs++
	rel := fmt.Sprintf("chunked/%s-%d", tg.name, b.runs)
	dir := filepath.Join(b.tree.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return skip("failed: " + err.Error())
	}
	// Removed last, after the child has ended: the file and any temporary
	// file a failed run left beside it.
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(b.progress, "fsbench: removing the chunked run's directory: %v\n", err)
		}
	}()
	o := newChunkedOp(filesProto{mount: filepath.Base(b.tree.root)}.path(rel+"/file.txt"), size, chunk)

	c, _, err := b.start(tg, w, b.tree.root, "")
	if err != nil {
		return skip("failed: " + err.Error())
	}
	watchdog := time.AfterFunc(b.cfg.timeout, c.kill)
	alive := func() { watchdog.Reset(b.cfg.timeout) }
	cpu0 := c.cpuTime()
	wst, err := chunkHalf(c, o.chunks(), 1, o.writeReq, o.checkWrite, alive)
	rows[0].PeakRSS = c.peakRSS()
	cpu1 := c.cpuTime()
	var rst *runStats
	switch {
	case err != nil:
	case wst.errors > 0:
		rows[1].Skipped = "not run: the write failed"
	default:
		if rerr := c.resetPeakRSS(); rerr != nil {
			fmt.Fprintf(b.progress, "fsbench: %s: %v; the read's peak RSS is the whole run's\n", tg.name, rerr)
		}
		rst, err = chunkHalf(c, o.chunks(), int64(o.chunks())+1, o.readReq, o.checkRead, alive)
		rows[1].PeakRSS = c.peakRSS()
	}
	cpu2 := c.cpuTime()
	watchdog.Stop()
	if cerr := c.close(5 * time.Second); err == nil && cerr != nil {
		err = fmt.Errorf("at the end: %w", cerr)
	}
	if err != nil {
		return skip("failed: " + err.Error())
	}
	rows[0].fill(wst)
	rows[0].BytesPerSecond = bytesPerSecond(wst, o)
	rows[0].CPUPerRequest = cpuPer(cpu0, cpu1, rows[0].Requests)
	if rst != nil {
		rows[1].fill(rst)
		rows[1].BytesPerSecond = bytesPerSecond(rst, o)
		rows[1].CPUPerRequest = cpuPer(cpu1, cpu2, rows[1].Requests)
	}
	return rows
}

// bytesPerSecond is the file's bytes over a half's time, when it went through
// whole; else 0.
func bytesPerSecond(st *runStats, o *chunkedOp) float64 {
	if st.errors > 0 || st.elapsed <= 0 {
		return 0
	}
	return float64(o.size) / st.elapsed.Seconds()
}

// cpuPer is the CPU time from before to after per request, or 0 when either
// sample is missing (not Linux) or there were no requests.
func cpuPer(before, after time.Duration, requests int) time.Duration {
	if before < 0 || after < 0 || requests == 0 {
		return 0
	}
	return (after - before) / time.Duration(requests)
}

// parseSize reads a byte count: an integer, optionally followed by K, M or G
// (or KiB, MiB, GiB: powers of 1024).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"K", 10}, {"M", 20}, {"G", 30}, {"B", 0}}
	num, shift := s, uint(0)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok && n != "" {
			num, shift = n, u.shift
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with K, M or G)", s)
	}
	return v << shift, nil
}

// sizeValue is a flag.Value of a byte count, written as parseSize reads it.
type sizeValue struct{ v *int64 }

// String implements flag.Value.
func (s sizeValue) String() string {
	if s.v == nil {
		return ""
	}
	return sizeName(*s.v)
}

// Set implements flag.Value.
func (s sizeValue) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s.v = n
	return nil
}

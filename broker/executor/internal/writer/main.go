// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Command writer is a test helper of package executor: a broker-like process
// that writes one file through executor.Write in a loop (so that tests can
// kill it at any moment, or run two of them against one state directory),
// or holds a file's lock until its standard input closes. It is built and
// run by the executor's tests only.
//
// Every payload is a 32-byte header followed by a body of one repeated byte:
//
//	"FSBWRITE" | body length (uint64 LE) | sequence (uint64 LE) | value (uint64 LE)
//
// so that a reader can tell that what it read is one complete version.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// HeaderSize is the length of a payload's header.
const HeaderSize = 32

// Magic starts every payload.
const Magic = "FSBWRITE"

func main() {
	root := flag.String("root", "", "the root directory")
	state := flag.String("state", "", "the state directory (locks)")
	file := flag.String("file", "data.bin", "the file, relative to the root")
	value := flag.Int("value", 'A', "the body's byte value")
	vary := flag.Bool("vary", false, "add the sequence number to the byte value, so that successive versions differ")
	size := flag.Int("size", 1<<20, "the body's length in bytes")
	n := flag.Int("n", 0, "writes to make (0: until killed)")
	hold := flag.Bool("hold", false, `take the file's lock, print "locked", and hold it until stdin closes`)
	flag.Parse()
	if err := run(*root, *state, *file, byte(*value), *vary, *size, *n, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
}

func run(root, state, file string, value byte, vary bool, size, n int, hold bool) error {
	set, err := roots.New([]roots.Spec{{Path: root, Writable: true}})
	if err != nil {
		return err
	}
	p, err := canon.Parse(set, filepath.Base(root)+"/"+file)
	if err != nil {
		return err
	}
	x, err := executor.New(state, executor.WithLockWait(30*time.Second))
	if err != nil {
		return err
	}
	defer x.Close()
	ctx := context.Background()
	if hold {
		unlock, err := x.Lock(ctx, p)
		if err != nil {
			return err
		}
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		unlock()
		return nil
	}
	buf := make([]byte, HeaderSize+size)
	copy(buf, Magic)
	binary.LittleEndian.PutUint64(buf[8:], uint64(size))
	ok, fail := 0, 0
	out := bufio.NewWriter(os.Stdout)
	for seq := 1; n == 0 || seq <= n; seq++ {
		v := value
		if vary {
			v = value + byte(seq)
		}
		binary.LittleEndian.PutUint64(buf[16:], uint64(seq))
		binary.LittleEndian.PutUint64(buf[24:], uint64(v))
		body := buf[HeaderSize:]
		if len(body) > 0 {
			body[0] = v
			for filled := 1; filled < len(body); filled *= 2 {
				copy(body[filled:], body[:filled])
			}
		}
		t, err := x.Resolve(context.Background(), p, true)
		if err == nil {
			_, err = x.Write(ctx, t, buf, executor.WriteOptions{Create: true})
		}
		if err != nil {
			fail++
			if fail <= 5 {
				fmt.Fprintln(os.Stderr, "write:", err)
			}
			continue
		}
		ok++
	}
	fmt.Fprintf(out, "ok=%d fail=%d\n", ok, fail)
	return out.Flush()
}

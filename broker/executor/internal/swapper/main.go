// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Command swapper is a test helper of package executor: a second local
// process that keeps swapping one entry of a root for a symbolic link while
// the tests' executor works on it, as another program sharing the machine
// could (it only ever changes entries inside the root, never outside). It is
// built and run by the executor's tests only.
//
// It prints "ready" once it has started swapping, runs until its standard
// input closes (so it never outlives the test that started it), and then
// prints "swaps=N", the rounds it made. Tests start and stop it through
// package swaptest (the executor's swap attacks and the watch's).
//
// With -pause D it spins D after every second round (in mode exchange,
// with the directory back at -name), so that what reacts to each swap (a
// recursive watch walking what appeared) can keep up; a spin, not a sleep,
// because a sleep this short takes a millisecond.
//
// Modes (-mode):
//
//	exchange  -name is a real directory. A link to -target is made beside it
//	          (-name + ".link"), and each round exchanges the two atomically
//	          (renameat2 RENAME_EXCHANGE, Linux only), so that -name is the
//	          directory or the link, never missing; the directory is put
//	          back at -name at the end.
//	missing   -name is normally absent. A link to -target is made beside it
//	          (-name + ".link"), and each round renames it to -name and back;
//	          a directory found at -name (made by the executor between two
//	          rounds) is moved into -junk once it has been there for -keep
//	          (so that a request that made it can finish through it).
//	move      -name is an entry (a .git directory, say). Each round renames
//	          it to -target (a host path, in another directory of the root)
//	          and back; a round whose first rename fails (-target's
//	          directory is missing) moves nothing, so that the entry is at
//	          -name between rounds and at the end.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

func main() {
	mode := flag.String("mode", "", "exchange, missing or move")
	name := flag.String("name", "", "the entry to swap (a host path)")
	target := flag.String("target", "", "the target of the link put at -name")
	junk := flag.String("junk", "", "mode missing: where a directory found at -name is moved")
	pause := flag.Duration("pause", 0, "spin this long after every second round")
	keep := flag.Duration("keep", 0, "mode missing: how long a directory found at -name stays before it is moved")
	flag.Parse()
	if *name == "" || *target == "" {
		fail("-name and -target are required")
	}
	var round func(n int)
	switch *mode {
	case "exchange":
		link := *name + ".link"
		if err := os.Symlink(*target, link); err != nil {
			fail(err.Error())
		}
		round = func(int) {
			if err := exchange(*name, link); err != nil {
				fail(err.Error())
			}
		}
		defer func() {
			if fi, err := os.Lstat(*name); err == nil && !fi.IsDir() {
				_ = exchange(*name, link)
			}
			_ = os.Remove(link)
		}()
	case "missing":
		if *junk == "" {
			fail("mode missing needs -junk")
		}
		link := *name + ".link"
		if err := os.Symlink(*target, link); err != nil {
			fail(err.Error())
		}
		var found time.Time // when the directory now at -name was first seen
		round = func(n int) {
			if err := os.Rename(link, *name); err != nil {
				// The executor made a directory there: move it away
				// once it has stayed -keep.
				if found.IsZero() {
					found = time.Now()
				}
				if time.Since(found) >= *keep {
					_ = os.Rename(*name, filepath.Join(*junk, strconv.Itoa(n)))
					found = time.Time{}
				}
				return
			}
			found = time.Time{}
			if err := os.Rename(*name, link); err != nil {
				fail(err.Error())
			}
		}
		defer func() { _ = os.Remove(link) }()
	case "move":
		round = func(int) {
			if os.Rename(*name, *target) == nil {
				// Fails only when the entry was destroyed meanwhile,
				// which the test sees.
				_ = os.Rename(*target, *name)
			}
		}
	default:
		fail(fmt.Sprintf("unknown -mode %q", *mode))
	}

	var stop atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	round(0)
	fmt.Println("ready")
	n := 1
	for ; !stop.Load(); n++ {
		round(n)
		if *pause > 0 && n%2 == 1 {
			for start := time.Now(); time.Since(start) < *pause; {
			}
		}
	}
	fmt.Printf("swaps=%d\n", n)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "swapper:", msg)
	os.Exit(2)
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package grants_test

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

func init() { roles["grant-limited"] = grantLimitedRole }

// grantLimitedRole is a helper's role: args are DIR, SERVER and LIMIT; it
// limits the size of the files it writes to LIMIT bytes (RLIMIT_FSIZE,
// under which a write stops short with EFBIG, as on a full disk), then
// gives SERVER three read grants in one Grant, and prints its error.
func grantLimitedRole(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want DIR SERVER LIMIT, got %q", args)
	}
	limit, err := strconv.ParseUint(args[2], 10, 64)
	if err != nil {
		return err
	}
	s, err := grants.Open(args[0])
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.List(args[1]); err != nil { // the file read whole: appendable
		return err
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return err
	}
	_, err = s.Grant(args[1], read("proj/one"), read("proj/two"), read("proj/three"))
	fmt.Printf("error %v\n", err)
	return nil
}

// A Grant whose append stops short (a full disk) fails and grants none of
// its grants, though whole records of some of them were written: the file
// is cut back to its length before the append. (Those records were left,
// granting what the caller was told failed, with no audit record of it.)
func TestShortAppendGrantsNothing(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	grant(t, s, "notes", read("proj/a-long-enough-name-to-leave-room-for-three-records-appended-to-it"),
		read("proj/another-long-enough-name-to-leave-room-for-three-records-appended-to-it"))
	fi, err := os.Stat(s.Path("notes"))
	if err != nil {
		t.Fatal(err)
	}
	// Room for the first record, whole, and a part of the second.
	limit := fi.Size() + 300
	h := helperproc.Start(t, helperproc.Command("grant-limited", dir, "notes", strconv.FormatInt(limit, 10)))
	line := h.Line()
	if line == "error <nil>" {
		t.Fatalf("the Grant past the size limit succeeded")
	}
	t.Log(line)
	if got := paths(list(t, open(t, dir), "notes")); len(got) != 2 {
		t.Fatalf("after a failed Grant the server holds %q, want the 2 grants before it", got)
	}
	if after, err := os.Stat(s.Path("notes")); err != nil || after.Size() != fi.Size() {
		t.Fatalf("the file is %v bytes (%v), want %d as before the append", after.Size(), err, fi.Size())
	}
}

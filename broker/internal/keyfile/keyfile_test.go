// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package keyfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestReplaceLockAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	name := Name("server ../odd/ id")
	if !IsName(name) || IsName(name[1:]) || IsName("G"+name[1:]) {
		t.Fatalf("Name %q, or IsName, is wrong", name)
	}
	// A crashed writer's temporary file (its lock free) is removed at Open; a
	// file of another shape is left alone.
	leftover := filepath.Join(dir, TempPrefix+name+"-123")
	other := filepath.Join(dir, TempPrefix+"not-a-name")
	for _, p := range []string{leftover, other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Open(dir, "test", 0, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the leftover temporary file is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file that is not a leftover was removed: %v", err)
	}

	unlock, err := d.Lock(name, true)
	if err != nil {
		t.Fatal(err)
	}
	// The lock is held: another taker (a second Dir, as another process) gives up.
	d2, err := Open(dir, "test", 0, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if _, err := d2.Lock(name, false); err == nil {
		t.Error("a shared lock was taken while the exclusive one was held")
	}
	st, err := d.Replace(name, []byte(`{"v":1}`))
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := StatStamp(d.DataPath(name)); err != nil || got != st {
		t.Errorf("StatStamp = %+v, %v; want the stamp Replace returned, %+v", got, err, st)
	}
	if none, err := StatStamp(d.DataPath(Name("nobody"))); err != nil || none != (Stamp{}) {
		t.Errorf("StatStamp of a missing file = %+v, %v", none, err)
	}
	if err := d.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(name); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 { // the lock file and the other file
		t.Errorf("left in the directory: %v", entries)
	}
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountsChildEnv names, in the environment of this test binary started
// again in a mount namespace of its own, the directory whose bind mounts
// it makes (runMountsChild).
const mountsChildEnv = "FSBROKER_SANDBOX_MOUNTS_CHILD"

// mountsLayout is the directories of TestReadOnlyInWritableThroughMounts
// under base, and the bind mounts the child makes of them.
type mountsLayout struct {
	base string
}

func (l mountsLayout) p(rel string) string { return filepath.Join(l.base, rel) }

// roots are the operator's roots: each read-only one is reached from a
// writable one only through a bind mount, never by its path.
func (l mountsLayout) roots() []Root {
	return []Root{
		{Path: l.p("srv/data"), Writable: true}, // also at alias/, which holds the read-only alias/docs
		{Path: l.p("alias/docs")},
		{Path: l.p("w2"), Writable: true}, // w2/in ner shows ro2/sub (a space in its name: mountinfo escapes it)
		{Path: l.p("ro2")},
		{Path: l.p("w3"), Writable: true}, // w3/top shows top/, which holds top/ro3
		{Path: l.p("top/ro3")},
		{Path: l.p("w4"), Writable: true}, // w4/other shows other/, which holds no root
		{Path: l.p("ro4")},
	}
}

// binds are the bind mounts the child makes: source, then mount point.
func (l mountsLayout) binds() [][2]string {
	return [][2]string{{l.p("srv/data"), l.p("alias")}, {l.p("ro2/sub"), l.p("w2/in ner")},
		{l.p("top"), l.p("w3/top")}, {l.p("other"), l.p("w4/other")}}
}

// mountsReport is what the child finds: the overlaps, and what a server
// confined to the roots' rules gets writing a read-only root through the
// bind mount and by its own path.
type mountsReport struct {
	Overlaps []Overlap
	Writes   map[string]string
}

// A read-only root that a writable root reaches only through a bind
// mount is writable to a confined server: Landlock grants the write right
// to whatever lies under the writable directory, by whatever path it is
// reached. ReadOnlyInWritable finds each (by device and inode of the
// directories on the root's path, and by the mounts under the writable
// root), saying through what, and not the bind mount that shows no root.
// The mounts are made in a user and mount namespace of the test's own (so
// no root is needed, and nothing outside sees them); where the kernel
// offers none to this user, the test skips. With Landlock, the child also
// shows the attack: confined, it writes ro2/sub/f through w2/in ner, and is
// refused the same write by ro2's own path.
func TestReadOnlyInWritableThroughMounts(t *testing.T) {
	l := mountsLayout{base: t.TempDir()}
	for _, d := range []string{"srv/data/docs", "alias", "w2/in ner", "ro2/sub", "w3/top", "top/ro3", "w4/other", "other", "ro4"} {
		if err := os.MkdirAll(l.p(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := ReadOnlyInWritable(Config{}, l.roots()); len(got) != 0 {
		t.Fatalf("before the bind mounts, overlaps %v, want none", got)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mountsChildEnv+"="+l.base)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Fatalf("the child in its mount namespace: %v\n%s", err, exit.Stderr)
	case err != nil:
		t.Skipf("bind mounts need a user namespace of the test's own, which this kernel does not give this user (%v), or root", err)
	}
	var rep mountsReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("the child's report: %v\n%s", err, out)
	}
	want := []Overlap{
		{ReadOnly: l.p("alias/docs"), Writable: l.p("srv/data"), Via: l.p("alias") + ", the same directory"},
		{ReadOnly: l.p("ro2"), Writable: l.p("w2"), Via: "the mount at " + l.p("w2/in ner")},
		{ReadOnly: l.p("top/ro3"), Writable: l.p("w3"), Via: "the mount at " + l.p("w3/top")},
	}
	if fmt.Sprint(rep.Overlaps) != fmt.Sprint(want) {
		t.Errorf("overlaps:\n%v\nwant:\n%v", rep.Overlaps, want)
	}
	if s := want[1].String(); !strings.Contains(s, "through the mount at "+l.p("w2/in ner")) {
		t.Errorf("%q does not say through what", s)
	}
	if ABI() < 1 {
		return
	}
	if got := rep.Writes["through-bind"]; got != "ok" {
		t.Errorf("confined, a write in the read-only ro2 through w2/in ner: %s, want ok (what the check is for)", got)
	}
	if got := rep.Writes["own-path"]; got != "EACCES" {
		t.Errorf("confined, a write in the read-only ro2 by its own path: %s, want EACCES", got)
	}
}

// runMountsChild is the child of TestReadOnlyInWritableThroughMounts, in
// its user and mount namespace: it makes the bind mounts, prints what
// ReadOnlyInWritable finds, then confines itself to the roots' rules and
// writes the read-only ro2 through w2/in ner and by its own path.
func runMountsChild(base string) error {
	l := mountsLayout{base: base}
	for _, b := range l.binds() {
		if err := syscall.Mount(b[0], b[1], "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s at %s: %w", b[0], b[1], err)
		}
	}
	rep := mountsReport{Overlaps: ReadOnlyInWritable(Config{}, l.roots()), Writes: map[string]string{}}
	if ABI() >= 1 {
		if _, err := Restrict(ServerRules(Config{}, l.roots()), false); err != nil {
			return err
		}
		for name, p := range map[string]string{"through-bind": l.p("w2/in ner/f"), "own-path": l.p("ro2/sub/g")} {
			switch err := os.WriteFile(p, []byte("x"), 0o644); {
			case err == nil:
				rep.Writes[name] = "ok"
			case errors.Is(err, syscall.EACCES):
				rep.Writes[name] = "EACCES"
			default:
				rep.Writes[name] = err.Error()
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

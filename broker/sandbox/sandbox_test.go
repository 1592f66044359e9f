// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Off, "off": Off, "false": Off, "true": On, "on": On, "best-effort": BestEffort, "Best-Effort": BestEffort} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("maybe"); err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Errorf("ParseMode(maybe) = %v, want an error naming it", err)
	}
}

// The rules a config gives: its system paths replace the defaults, its
// read and write paths add to them, read-only roots are read, writable
// roots and the devices written.
func TestServerRules(t *testing.T) {
	r := ServerRules(Config{System: []string{"/usr"}, Read: []string{"/opt/tools"}, Write: []string{"/var/cache/srv"}},
		[]Root{{Path: "/home/ann/docs"}, {Path: "/home/ann/project", Writable: true}})
	want := "write /home/ann/project\nwrite /dev/null\nwrite /dev/zero\nwrite /dev/full\nwrite /dev/random\n" +
		"write /dev/urandom\nwrite /var/cache/srv\nread  /usr\nread  /opt/tools\nread  /home/ann/docs\n"
	if got := r.Describe(); got != want {
		t.Errorf("rules:\n%s\nwant:\n%s", got, want)
	}
	def := ServerRules(Config{}, nil)
	if !strings.Contains(def.Describe(), "read  /usr\n") || strings.Contains(def.Describe(), "read  /etc\n") {
		t.Errorf("default rules:\n%s\nwant /usr readable and not /etc as a whole", def.Describe())
	}
}

func TestStatus(t *testing.T) {
	if s := (Status{ABI: 7}).String(); s != "confined (Landlock ABI 7)" {
		t.Errorf("status = %q", s)
	}
	if s := (Status{Reason: "no Landlock"}).String(); s != "not confined: no Landlock" {
		t.Errorf("status = %q", s)
	}
}

// A read-only root in a writable root, at a writable root or in a
// sandbox.write path is found, with both paths, also through a symbolic
// link; a sibling whose name only starts like the writable root's is not.
func TestReadOnlyInWritable(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"w/docs", "w2", "cache/ro", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "link-to-docs")
	if err := os.Symlink(filepath.Join(base, "w", "docs"), link); err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(base, "w")
	got := ReadOnlyInWritable(Config{Write: []string{filepath.Join(base, "cache")}}, []Root{
		{Path: w, Writable: true},
		{Path: filepath.Join(base, "w", "docs")},
		{Path: link},
		{Path: filepath.Join(base, "w2")},
		{Path: filepath.Join(base, "cache", "ro")},
		{Path: filepath.Join(base, "elsewhere")},
	})
	want := []Overlap{{filepath.Join(base, "w", "docs"), w, ""}, {link, w, ""}, {filepath.Join(base, "cache", "ro"), filepath.Join(base, "cache"), ""}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("overlaps:\n%v\nwant:\n%v", got, want)
	}
	if s := got[0].String(); !strings.Contains(s, want[0].ReadOnly) || !strings.Contains(s, w) {
		t.Errorf("%q does not name both roots", s)
	}
	if got := ReadOnlyInWritable(Config{}, []Root{{Path: "/", Writable: true}, {Path: "/srv"}}); len(got) != 1 {
		t.Errorf("a read-only root under a writable /: %v", got)
	}
}

//go:build linux

package executor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// TestRootReplacedIsRefused: a root replaced after it was resolved (the
// operator's start-up), by a link to an outside tree or by another
// directory, before the executor first used it: every operation is
// PERMISSION_DENIED naming the mount, nothing outside is read, listed or
// changed. A reload (the roots resolved again) re-pins the new directory.
func TestRootReplacedIsRefused(t *testing.T) {
	replacements := map[string]func(t *testing.T, f *fixture){
		"link out": func(t *testing.T, f *fixture) {
			if err := os.Symlink(f.outside, f.dir); err != nil {
				t.Fatal(err)
			}
		},
		"another directory": func(t *testing.T, f *fixture) {
			if err := os.Mkdir(f.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.dir, "secret"), []byte("NEW"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, replace := range replacements {
		t.Run(name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, f *fixture) {
				if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte("OUTSIDE"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(f.dir, f.dir+".orig"); err != nil {
					t.Fatal(err)
				}
				replace(t, f)
				ctx := ctxT(t)
				wantReplaced := func(what string, err error) {
					t.Helper()
					e := wantCode(t, err, errcode.PermissionDenied, "")
					if !strings.Contains(e.Reason, "the root proj was replaced") {
						t.Fatalf("%s: reason %q does not say the root proj was replaced", what, e.Reason)
					}
					wantKnownCode(t, err, f.tmp)
				}
				for _, raw := range []string{"proj", "proj/secret", "proj/new"} {
					_, err := f.x.Resolve(ctx, f.path(t, raw), true)
					wantReplaced("Resolve "+raw, err)
				}
				_, err := f.x.RemoveStaleTemps(ctx, f.root)
				wantReplaced("RemoveStaleTemps", err)
				if b, _ := os.ReadFile(filepath.Join(f.outside, "secret")); string(b) != "OUTSIDE" {
					t.Fatalf("outside/secret is %q", b)
				}
				if names := dirEntries(t, f.outside); len(names) != 1 {
					t.Fatalf("outside holds %v", names)
				}

				// The operator reloads: the root is resolved again, and its
				// new directory is used.
				set, err := roots.New([]roots.Spec{{Path: f.dir, Mount: "proj", Writable: true}})
				if err != nil {
					t.Fatal(err)
				}
				f.set = set
				tg := f.resolve(t, "proj/secret", true)
				res, err := f.x.Read(ctx, tg, executor.ReadOptions{Length: 100})
				want := map[string]string{"link out": "OUTSIDE", "another directory": "NEW"}[name]
				if err != nil || string(res.Data) != want {
					t.Fatalf("after the reload: %q, %v", res.Data, err)
				}
			})
		})
	}
}

// TestPinnedRootKeepsItsDirectory: once the executor has opened a root, the
// root's path replaced by a link to an outside tree changes nothing: reads,
// listings and writes act in the directory opened (pinned), never outside.
func TestPinnedRootKeepsItsDirectory(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		f.writeFile(t, "f.txt", "PINNED")
		if err := os.WriteFile(filepath.Join(f.outside, "f.txt"), []byte("OUTSIDE"), 0o644); err != nil {
			t.Fatal(err)
		}
		f.resolve(t, "proj/f.txt", true) // opens (pins) the root
		if err := os.Rename(f.dir, f.dir+".orig"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(f.outside, f.dir); err != nil {
			t.Fatal(err)
		}
		if got := string(f.read(t, "proj/f.txt").Data); got != "PINNED" {
			t.Fatalf("read %q", got)
		}
		if got := listAll(t, f, "proj", executor.ListOptions{Limit: 10}); len(got) != 1 || got[0] != "proj/f.txt" {
			t.Fatalf("listed %v", got)
		}
		f.write(t, "proj/new.txt", "written")
		if _, err := os.Lstat(filepath.Join(f.dir+".orig", "new.txt")); err != nil {
			t.Fatalf("the write did not land in the pinned directory: %v", err)
		}
		if names := dirEntries(t, f.outside); len(names) != 1 {
			t.Fatalf("outside holds %v", names)
		}
	})
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package usage_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/usage"
)

// day0 is a fixed instant; tests pass their own clock.
var day0 = time.Date(2025, 3, 9, 12, 0, 0, 0, time.UTC)

func open(t testing.TB, dir string, opts ...usage.Option) *usage.Store {
	t.Helper()
	s, err := usage.Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func today(t testing.TB, s *usage.Store, server string, now time.Time) int64 {
	t.Helper()
	n, err := s.Today(server, now)
	if err != nil {
		t.Fatalf("Today(%q, %s): %v", server, now, err)
	}
	return n
}

func add(t testing.TB, s *usage.Store, server string, now time.Time, n int64) int64 {
	t.Helper()
	total, err := s.Add(server, now, n)
	if err != nil {
		t.Fatalf("Add(%q, %s, %d): %v", server, now, n, err)
	}
	return total
}

// stored reads a count file as JSON.
func stored(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return m
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", usage.DirName)
	open(t, dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: mode %v, want a directory 0700", dir, fi.Mode())
	}
}

func TestAddAndReadBack(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if n := today(t, s, "srv", day0); n != 0 {
		t.Fatalf("a new server's count is %d, want 0", n)
	}
	if _, err := os.Stat(s.Path("srv")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Today created the count file: %v", err)
	}
	for i, want := range []int64{100, 150, 150, 1174} {
		n := []int64{100, 50, 0, 1024}[i]
		if got := add(t, s, "srv", day0, n); got != want {
			t.Fatalf("Add #%d returned %d, want %d", i, got, want)
		}
		if got := today(t, s, "srv", day0); got != want {
			t.Fatalf("Today after Add #%d is %d, want %d", i, got, want)
		}
	}
	if got := today(t, s, "other", day0); got != 0 {
		t.Fatalf("another server's count is %d, want 0", got)
	}

	// The file, as documented.
	m := stored(t, s.Path("srv"))
	want := map[string]any{"server": "srv", "day": "2025-03-09", "bytesWritten": float64(1174)}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("file holds %v, want %v", m, want)
	}
	fi, err := os.Stat(s.Path("srv"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("count file mode %v, want 0600", fi.Mode().Perm())
	}

	// Another Store (a restarted broker) reads it back.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Today("srv", day0); !errors.Is(err, usage.ErrClosed) {
		t.Fatalf("Today after Close: %v, want ErrClosed", err)
	}
	s2 := open(t, dir)
	if got := today(t, s2, "srv", day0); got != 1174 {
		t.Fatalf("a new Store reads %d, want 1174", got)
	}
	if got := add(t, s2, "srv", day0, 6); got != 1180 {
		t.Fatalf("a new Store adds to %d, want 1180", got)
	}
}

func TestAddRefusesNegative(t *testing.T) {
	s := open(t, t.TempDir())
	add(t, s, "srv", day0, 10)
	if _, err := s.Add("srv", day0, -5); err == nil {
		t.Fatal("Add of a negative count succeeded")
	}
	if got := today(t, s, "srv", day0); got != 10 {
		t.Fatalf("count after a refused Add is %d, want 10", got)
	}
}

func TestAddSaturates(t *testing.T) {
	s := open(t, t.TempDir())
	add(t, s, "srv", day0, math.MaxInt64-1)
	if got := add(t, s, "srv", day0, 10); got != math.MaxInt64 {
		t.Fatalf("count is %d, want it saturated at MaxInt64", got)
	}
	if got := add(t, s, "srv", day0, math.MaxInt64); got != math.MaxInt64 {
		t.Fatalf("count is %d, want it saturated at MaxInt64", got)
	}
}

func TestDayRollover(t *testing.T) {
	s := open(t, t.TempDir())
	last := time.Date(2025, 3, 9, 23, 59, 59, 999_999_999, time.UTC)
	midnight := last.Add(time.Nanosecond)
	add(t, s, "srv", last, 100)
	if got := today(t, s, "srv", last); got != 100 {
		t.Fatalf("Today at 23:59:59.999999999 is %d, want 100", got)
	}
	if got := today(t, s, "srv", midnight); got != 0 {
		t.Fatalf("Today at UTC midnight is %d, want 0", got)
	}
	// The day is the UTC one, whatever now's zone: 08:00 at +10:00 is
	// still the previous UTC day.
	east := time.Date(2025, 3, 10, 8, 0, 0, 0, time.FixedZone("+10", 10*3600))
	if got := today(t, s, "srv", east); got != 100 {
		t.Fatalf("Today at %s is %d, want 100 (UTC day 2025-03-09)", east, got)
	}
	if got := add(t, s, "srv", midnight, 7); got != 7 {
		t.Fatalf("the first Add of a new day returned %d, want 7", got)
	}
	if m := stored(t, s.Path("srv")); m["day"] != "2025-03-10" || m["bytesWritten"] != float64(7) {
		t.Fatalf("file holds %v after the rollover", m)
	}
	// A Store that never saw the old day reads the new one, and a later
	// day again starts at 0 without a write.
	s2 := open(t, filepath.Dir(s.Path("srv")))
	if got := today(t, s2, "srv", midnight); got != 7 {
		t.Fatalf("a new Store reads %d, want 7", got)
	}
	if got := today(t, s2, "srv", midnight.Add(48*time.Hour)); got != 0 {
		t.Fatalf("two days later the count is %d, want 0", got)
	}
}

func TestClockGoesBack(t *testing.T) {
	var logBuf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Warn})
	s := open(t, t.TempDir(), usage.WithLogger(log))
	d1 := day0.Add(24 * time.Hour) // 2025-03-10
	add(t, s, "srv", d1, 100)

	// The clock goes back a day: the count stays, and grows, under the
	// later day.
	if got := today(t, s, "srv", day0); got != 100 {
		t.Fatalf("after the clock went back Today is %d, want 100 (never reset)", got)
	}
	if got := add(t, s, "srv", day0, 5); got != 105 {
		t.Fatalf("after the clock went back Add returned %d, want 105", got)
	}
	if m := stored(t, s.Path("srv")); m["day"] != "2025-03-10" || m["bytesWritten"] != float64(105) {
		t.Fatalf("file holds %v, want day 2025-03-10 and 105 bytes", m)
	}
	if !strings.Contains(logBuf.String(), "dated after today") || !strings.Contains(logBuf.String(), s.Path("srv")) {
		t.Fatalf("no warning with the file's path; log:\n%s", logBuf.String())
	}
	if c := strings.Count(logBuf.String(), "dated after today"); c != 1 {
		t.Fatalf("warned %d times, want once; log:\n%s", c, logBuf.String())
	}
	// The clock catches up: the same day goes on counting; the next day
	// starts at 0.
	if got := add(t, s, "srv", d1, 1); got != 106 {
		t.Fatalf("back on 2025-03-10 Add returned %d, want 106", got)
	}
	if got := today(t, s, "srv", d1.Add(24*time.Hour)); got != 0 {
		t.Fatalf("on 2025-03-11 Today is %d, want 0", got)
	}
	// A Store opened while the clock is behind sees the same.
	s2 := open(t, filepath.Dir(s.Path("srv")))
	if got := today(t, s2, "srv", day0.Add(-72*time.Hour)); got != 106 {
		t.Fatalf("a new Store three days behind reads %d, want 106", got)
	}
}

func TestOutOfRangeClock(t *testing.T) {
	s := open(t, t.TempDir())
	for _, now := range []time.Time{{}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, err := s.Today("srv", now); err == nil {
			t.Errorf("Today at %s succeeded", now)
		}
		if _, err := s.Add("srv", now, 1); err == nil {
			t.Errorf("Add at %s succeeded", now)
		}
	}
}

func TestCorruptFileIsAnError(t *testing.T) {
	valid := func(server, day string, n any) string {
		b, _ := json.Marshal(map[string]any{"server": server, "day": day, "bytesWritten": n})
		return string(b)
	}
	cases := []struct {
		name    string
		content string
		dir     bool // a directory in place of the file
	}{
		{name: "garbage", content: "\x00\x01not json"},
		{name: "empty", content: ""},
		{name: "truncated", content: valid("srv", "2025-03-09", 123)[:20]},
		{name: "trailing data", content: valid("srv", "2025-03-09", 123) + "}"},
		{name: "not an object", content: "123"},
		{name: "missing count", content: `{"server":"srv","day":"2025-03-09"}`},
		{name: "null count", content: `{"server":"srv","day":"2025-03-09","bytesWritten":null}`},
		{name: "missing day", content: `{"server":"srv","bytesWritten":5}`},
		{name: "missing server", content: `{"day":"2025-03-09","bytesWritten":5}`},
		{name: "another server", content: valid("other", "2025-03-09", 5)},
		{name: "bad day", content: valid("srv", "2025-3-9", 5)},
		{name: "impossible day", content: valid("srv", "2025-02-30", 5)},
		{name: "day with time", content: valid("srv", "2025-03-09T00:00:00Z", 5)},
		{name: "negative", content: valid("srv", "2025-03-09", -1)},
		{name: "fraction", content: valid("srv", "2025-03-09", 1.5)},
		{name: "string count", content: valid("srv", "2025-03-09", "5")},
		{name: "too large", content: strings.Repeat(" ", 70<<10) + valid("srv", "2025-03-09", 5)},
		{name: "directory", dir: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, t.TempDir())
			path := s.Path("srv")
			if tc.dir {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			check := func(what string, n int64, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s returned %d and no error", what, n)
				}
				if !errors.Is(err, usage.ErrCorrupt) {
					t.Fatalf("%s: %v, want ErrCorrupt", what, err)
				}
				var ue *usage.Error
				if !errors.As(err, &ue) || ue.Path != path || ue.Server != "srv" {
					t.Fatalf("%s: %#v, want a *usage.Error with the path %s", what, err, path)
				}
				if !strings.Contains(err.Error(), path) {
					t.Fatalf("%s: %q does not name the file", what, err)
				}
			}
			n, err := s.Today("srv", day0)
			check("Today", n, err)
			n, err = s.Today("srv", day0) // from the cache
			check("Today again", n, err)
			n, err = s.Add("srv", day0, 10)
			check("Add", n, err)
			if !tc.dir {
				b, err := os.ReadFile(path)
				if err != nil || string(b) != tc.content {
					t.Fatalf("Add changed the corrupt file (err %v)", err)
				}
			}
			n, err = open(t, filepath.Dir(path)).Today("srv", day0)
			check("another Store's Today", n, err)
		})
	}
}

// TestFailedAddIsKept: an Add that cannot write keeps its bytes in the
// Store, which counts them and writes them with the next Add.
func TestFailedAddIsKept(t *testing.T) {
	s := open(t, t.TempDir())
	add(t, s, "srv", day0, 100)
	if err := os.WriteFile(s.Path("srv"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add("srv", day0, 30); !errors.Is(err, usage.ErrCorrupt) {
		t.Fatalf("Add on a corrupt file: %v", err)
	}
	// The operator removes the file (resetting the day's count to what
	// this Store still holds).
	if err := os.Remove(s.Path("srv")); err != nil {
		t.Fatal(err)
	}
	if got := today(t, s, "srv", day0); got != 30 {
		t.Fatalf("Today after the failed Add is %d, want the 30 kept bytes", got)
	}
	if got := add(t, s, "srv", day0, 5); got != 35 {
		t.Fatalf("the next Add returned %d, want 35", got)
	}
	if got := today(t, open(t, filepath.Dir(s.Path("srv"))), "srv", day0); got != 35 {
		t.Fatalf("another Store reads %d, want 35", got)
	}
	// Kept bytes of a past day are dropped at the next day.
	if err := os.WriteFile(s.Path("srv"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add("srv", day0, 30); err == nil {
		t.Fatal("Add on a corrupt file succeeded")
	}
	if err := os.Remove(s.Path("srv")); err != nil {
		t.Fatal(err)
	}
	next := day0.Add(24 * time.Hour)
	if got := today(t, s, "srv", next); got != 0 {
		t.Fatalf("the next day Today is %d, want 0", got)
	}
	if got := add(t, s, "srv", next, 1); got != 1 {
		t.Fatalf("the next day Add returned %d, want 1", got)
	}
}

// TestLeftoverTempFileIgnored: a crash between creating the temporary file
// and the rename leaves the temporary file; it is never read, and the next
// Open removes it.
func TestLeftoverTempFileIgnored(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	add(t, s, "srv", day0, 42)
	hash := strings.TrimSuffix(filepath.Base(s.Path("srv")), ".json")
	leftovers := []string{
		".tmp-" + hash + "-123456",                          // torn
		".tmp-" + hash + "-999",                             // complete, never renamed
		".tmp-" + strings.Repeat("0", 64) + "-1",            // another server
		".tmp-" + strings.Repeat("a", 64) + "-1" + ".extra", // odd suffix, still ours
	}
	contents := []string{`{"server":"srv","da`, `{"server":"srv","day":"2025-03-09","bytesWritten":999999}`, "x", "y"}
	for i, name := range leftovers {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(contents[i]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s2 := open(t, dir, usage.WithMaxStale(0))
	if got := today(t, s2, "srv", day0); got != 42 {
		t.Fatalf("Today is %d, want 42", got)
	}
	if got := add(t, s2, "srv", day0, 1); got != 43 {
		t.Fatalf("Add returned %d, want 43", got)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".tmp-") {
			t.Errorf("Open left %s", de.Name())
		}
	}
	// A file that merely looks like ours is not touched.
	foreign := filepath.Join(dir, ".tmp-notours")
	if err := os.WriteFile(foreign, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
	if _, err := os.Stat(foreign); err != nil {
		t.Fatalf("Open removed %s: %v", foreign, err)
	}
}

// TestLiveTempFileKept: Open does not remove the temporary file of a
// writer that holds its lock.
func TestLiveTempFileKept(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	add(t, s, "srv", day0, 1) // creates the lock file
	hash := strings.TrimSuffix(filepath.Base(s.Path("srv")), ".json")
	tmp := filepath.Join(dir, ".tmp-"+hash+"-1")
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := lockFile(t, filepath.Join(dir, hash+".lock"))
	open(t, dir)
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("Open removed a live writer's temporary file: %v", err)
	}
	held()
	open(t, dir)
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open kept a dead writer's temporary file: %v", err)
	}
}

func TestWeirdIDs(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, usage.DirName)
	s := open(t, dir)
	ids := []string{
		"", ".", "..", "../x", "../../etc/passwd", "a/b", "/abs/path", `a\b`, "a:b",
		"con", "NUL", "x.json", "x.lock", ".tmp-x", " spaced ", "tab\there", "new\nline",
		"Ünïcødé", "サーバー", "emoji 🙂", "\u202eright-to-left", "\ufffd\ufffd", "\xff\xfe",
		strings.Repeat("long/", 100), strings.Repeat("é", 300),
		`quote" and <html> & \ backslash`,
	}
	for i, id := range ids {
		if got := add(t, s, id, day0, int64(i+1)); got != int64(i+1) {
			t.Fatalf("Add for %q returned %d, want %d", id, got, i+1)
		}
		p := s.Path(id)
		if filepath.Dir(p) != filepath.Clean(dir) {
			t.Fatalf("the file of %q is %s, outside %s", id, p, dir)
		}
		if m := stored(t, p); utf8.ValidString(id) && m["server"] != id {
			t.Fatalf("the file of %q names server %q", id, m["server"])
		}
	}
	s2 := open(t, dir, usage.WithMaxStale(0))
	for i, id := range ids {
		if got := today(t, s2, id, day0); got != int64(i+1) {
			t.Fatalf("Today for %q is %d, want %d", id, got, i+1)
		}
	}
	name := regexp.MustCompile(`^[0-9a-f]{64}\.(json|lock)$`)
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	des = slices.DeleteFunc(des, func(de fs.DirEntry) bool {
		return de.Name() == usage.GenerationName && de.Type().IsRegular()
	})
	for _, de := range des {
		if !de.Type().IsRegular() || !name.MatchString(de.Name()) {
			t.Errorf("unexpected entry %s (%v)", de.Name(), de.Type())
		}
	}
	if len(des) != 2*len(ids) {
		t.Errorf("%d entries, want %d (a count and a lock per id, besides the generation file)", len(des), 2*len(ids))
	}
	pdes, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(pdes) != 1 || pdes[0].Name() != usage.DirName {
		t.Errorf("the parent holds %v, want only %s", pdes, usage.DirName)
	}
}

// TestOtherStoreSeenAtOnce: an Add through another Store (another process)
// is seen by the next Today, without waiting for the maximum staleness.
func TestOtherStoreSeenAtOnce(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, usage.WithMaxStale(time.Hour))
	b := open(t, dir, usage.WithMaxStale(time.Hour))
	if got := today(t, b, "srv", day0); got != 0 {
		t.Fatalf("Today is %d, want 0", got)
	}
	var want int64
	for i := range 50 {
		want = add(t, a, "srv", day0, int64(i%3+1))
		if got := today(t, b, "srv", day0); got != want {
			t.Fatalf("after Add #%d the other Store reads %d, want %d", i, got, want)
		}
	}
}

// TestMaxStaleBound: a change the stat cannot see (the file rewritten in
// place with the same size and modification time) is read within the
// maximum staleness.
func TestMaxStaleBound(t *testing.T) {
	dir := t.TempDir()
	const maxStale = 100 * time.Millisecond
	s := open(t, dir, usage.WithMaxStale(maxStale))
	add(t, s, "srv", day0, 111)
	path := s.Path("srv")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(old, []byte("111"), []byte("999"), 1)
	if bytes.Equal(old, changed) {
		t.Fatalf("unexpected file %s", old)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0) // in place: same inode
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(changed, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	// The Store last read the file (at its Add) before start; a Today
	// called maxStale after start rereads it.
	start := time.Now()
	for {
		called := time.Now()
		got := today(t, s, "srv", day0)
		if got == 999 {
			break
		}
		if got != 111 {
			t.Fatalf("Today is %d, want 111 or 999", got)
		}
		if d := called.Sub(start); d > maxStale+time.Millisecond {
			t.Fatalf("Today called %v after the change still reads %d, beyond the maximum staleness %v", d, got, maxStale)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTwoStoresConcurrent: two Stores on one directory, as two processes
// would have, add from many goroutines; every Add returns a distinct total
// and no Add is lost.
func TestTwoStoresConcurrent(t *testing.T) {
	dir := t.TempDir()
	stores := []*usage.Store{open(t, dir), open(t, dir, usage.WithMaxStale(0))}
	servers := []string{"alpha", "beta"}
	const goroutines, adds = 8, 20
	var mu sync.Mutex
	totals := map[string][]int64{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for _, s := range stores { // decisions read while writes go on
		readers.Add(1)
		go func() {
			defer readers.Done()
			last := map[string]int64{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, srv := range servers {
					n, err := s.Today(srv, day0)
					if err != nil {
						t.Error(err)
						return
					}
					if n < last[srv] {
						t.Errorf("Today of %s went down from %d to %d", srv, last[srv], n)
					}
					last[srv] = n
				}
			}
		}()
	}
	for g := range goroutines {
		for si, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range adds {
					srv := servers[(g+si+i)%2]
					total, err := s.Add(srv, day0, 1)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					totals[srv] = append(totals[srv], total)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	all := int64(0)
	for _, srv := range servers {
		checkSequence(t, srv, totals[srv])
		all += int64(len(totals[srv]))
		for _, s := range stores {
			if got := today(t, s, srv, day0); got != int64(len(totals[srv])) {
				t.Errorf("Today of %s is %d, want %d", srv, got, len(totals[srv]))
			}
		}
	}
	if all != 2*goroutines*adds {
		t.Errorf("%d Adds returned, want %d", all, 2*goroutines*adds)
	}
}

// checkSequence checks that Adds of 1 returned exactly 1..len(totals).
func checkSequence(t *testing.T, srv string, totals []int64) {
	t.Helper()
	s := slices.Clone(totals)
	slices.Sort(s)
	for i, v := range s {
		if v != int64(i+1) {
			t.Fatalf("%s: the Adds' totals, sorted, have %d at position %d, want %d (lost or duplicated Add)", srv, v, i, i+1)
		}
	}
}

// TestHandEditSeenBeforeAWrite: a count file an operator replaces by hand
// (not through a Store: the generation counter does not move) is read by the
// next TodayVerified, which the broker calls before every write, however
// large the maximum staleness.
func TestHandEditSeenBeforeAWrite(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, usage.WithMaxStale(time.Hour))
	add(t, s, "srv", day0, 111)
	path := s.Path("srv")
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	restored := bytes.Replace(old, []byte("111"), []byte("99999"), 1)
	tmp := path + ".restore"
	if err := os.WriteFile(tmp, restored, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	got, err := s.TodayVerified("srv", day0)
	if err != nil {
		t.Fatal(err)
	}
	if got != 99999 {
		t.Fatalf("TodayVerified after the file was restored by hand is %d, want 99999", got)
	}
}

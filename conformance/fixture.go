// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// areaPath joins a case-relative path to the area, refusing one that leaves it.
func areaPath(area, rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") {
		return "", fmt.Errorf("path %q: want a path relative to the area", rel)
	}
	p := filepath.Join(area, filepath.FromSlash(rel))
	if p != area && !strings.HasPrefix(p, area+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q leaves the area", rel)
	}
	return p, nil
}

// parseMode reads an octal mode.
func parseMode(s string) (fs.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q: %w", s, err)
	}
	return fs.FileMode(m), nil
}

// entryType is an entry's type with its defaults applied.
func entryType(e *Entry) string {
	switch {
	case e.Type != "":
		return e.Type
	case e.Target != nil:
		return "symlink"
	}
	return "file"
}

// entryContent is the bytes an entry says a file holds, and whether it says anything.
func entryContent(e *Entry, v *vars) ([]byte, bool, error) {
	switch {
	case e.Content != nil:
		s, err := v.str(*e.Content)
		return []byte(s), true, err
	case e.ContentBase64 != nil:
		s, err := v.str(*e.ContentBase64)
		if err != nil {
			return nil, false, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		return b, true, err
	case e.Size != nil:
		return []byte(fill(int(*e.Size))), true, nil
	}
	return nil, false, nil
}

// buildFixture creates the fixture's entries in order, making missing parent directories.
func buildFixture(area string, entries []Entry, v *vars) error {
	for i := range entries {
		e := &entries[i]
		p, err := areaPath(area, e.Path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch entryType(e) {
		case "dir":
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case "symlink":
			if e.Target == nil {
				return fmt.Errorf("fixture %s: a symlink needs a target", e.Path)
			}
			t, err := v.str(*e.Target)
			if err != nil {
				return err
			}
			if err := os.Symlink(filepath.FromSlash(t), p); err != nil {
				return err
			}
		case "fifo":
			if err := mkfifo(p); err != nil {
				return err
			}
		case "hardlink":
			if err := hardLink(area, p, e, v); err != nil {
				return err
			}
		default:
			data, _, err := entryContent(e, v)
			if err != nil {
				return fmt.Errorf("fixture %s: %w", e.Path, err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return err
			}
		}
		if e.Mode != "" && entryType(e) != "symlink" {
			m, err := parseMode(e.Mode)
			if err != nil {
				return err
			}
			// Directories get their mode after the whole fixture is built (below), so that
			// a read-only directory can still be filled.
			if entryType(e) != "dir" {
				if err := os.Chmod(p, m); err != nil {
					return err
				}
			}
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		if e.Mode != "" && entryType(e) == "dir" {
			m, err := parseMode(e.Mode)
			if err != nil {
				return err
			}
			p, _ := areaPath(area, e.Path)
			if err := os.Chmod(p, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// hardLink makes the fixture entry e at p a hard link to the area-relative
// file its target names (made earlier in the fixture).
func hardLink(area, p string, e *Entry, v *vars) error {
	if e.Target == nil {
		return fmt.Errorf("fixture %s: a hard link needs a target", e.Path)
	}
	t, err := v.str(*e.Target)
	if err != nil {
		return err
	}
	existing, err := areaPath(area, t)
	if err != nil {
		return fmt.Errorf("fixture %s: %w", e.Path, err)
	}
	return os.Link(existing, p)
}

// applyDisk performs a disk step.
func applyDisk(area string, d *DiskChange, v *vars) error {
	p, err := areaPath(area, d.Path)
	if err != nil {
		return err
	}
	content, err := v.str(d.Content)
	if err != nil {
		return err
	}
	switch d.Op {
	case "write":
		return os.WriteFile(p, []byte(content), 0o644)
	case "append":
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(content)
		return errors.Join(err, f.Close())
	case "mkdir":
		return os.MkdirAll(p, 0o755)
	case "remove":
		return os.Remove(p)
	case "removeAll":
		return os.RemoveAll(p)
	case "rename":
		to, err := areaPath(area, d.To)
		if err != nil {
			return err
		}
		return os.Rename(p, to)
	case "symlink":
		t, err := v.str(d.Target)
		if err != nil {
			return err
		}
		return os.Symlink(filepath.FromSlash(t), p)
	case "fifo":
		return mkfifo(p)
	case "chmod":
		m, err := parseMode(d.Mode)
		if err != nil {
			return err
		}
		return os.Chmod(p, m)
	}
	return fmt.Errorf("unknown disk op %q", d.Op)
}

// snapshot describes every path of the area outside the roots: type, permission bits, and a
// file's content digest or a link's target. A root directory is recorded but not descended.
func snapshot(area string, roots []string) (map[string]string, error) {
	snap := map[string]string{}
	err := filepath.WalkDir(area, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(area, p)
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				desc += " unreadable"
				break
			}
			sum := sha256.Sum256(data)
			desc += fmt.Sprintf(" %d bytes sha256 %s", len(data), hex.EncodeToString(sum[:8]))
		case info.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			desc += " -> " + t
		}
		snap[rel] = desc
		if d.IsDir() && p != area && slices.Contains(roots, p) {
			return filepath.SkipDir
		}
		return nil
	})
	return snap, err
}

// diffSnapshots lists what changed between two snapshots.
func diffSnapshots(before, after map[string]string) []string {
	var out []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("outside the roots: %s was removed (was %s)", p, b))
		case a != b:
			out = append(out, fmt.Sprintf("outside the roots: %s changed: was %s, now %s", p, b, a))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			out = append(out, fmt.Sprintf("outside the roots: %s was created (%s)", p, a))
		}
	}
	slices.Sort(out)
	return out
}

// checkEntry compares one after entry with the disk.
func checkEntry(area string, e *Entry, v *vars) []string {
	p, err := areaPath(area, e.Path)
	if err != nil {
		return []string{err.Error()}
	}
	info, err := os.Lstat(p)
	if e.Absent {
		if err == nil {
			return []string{fmt.Sprintf("%s exists (%s), want it absent", e.Path, info.Mode())}
		}
		return nil
	}
	if err != nil {
		return []string{fmt.Sprintf("%s: %v, want it present", e.Path, errors.Unwrap(err))}
	}
	var out []string
	typ := "file"
	switch m := info.Mode(); {
	case m.IsDir():
		typ = "dir"
	case m&fs.ModeSymlink != 0:
		typ = "symlink"
	case m&fs.ModeNamedPipe != 0:
		typ = "fifo"
	case !m.IsRegular():
		typ = "other"
	}
	if want := entryType(e); want != typ {
		out = append(out, fmt.Sprintf("%s is a %s, want a %s", e.Path, typ, want))
		return out
	}
	if e.Mode != "" {
		m, err := parseMode(e.Mode)
		if err == nil && info.Mode().Perm() != m.Perm() {
			out = append(out, fmt.Sprintf("%s has mode %04o, want %04o", e.Path, info.Mode().Perm(), m.Perm()))
		}
	}
	if typ == "symlink" && e.Target != nil {
		want, err := v.str(*e.Target)
		got, _ := os.Readlink(p)
		if err != nil || filepath.ToSlash(got) != want {
			out = append(out, fmt.Sprintf("%s links to %q, want %q", e.Path, got, want))
		}
	}
	if typ == "file" {
		if e.Content != nil || e.ContentBase64 != nil {
			want, _, err := entryContent(e, v)
			got, rerr := os.ReadFile(p)
			switch {
			case err != nil:
				out = append(out, err.Error())
			case rerr != nil:
				out = append(out, fmt.Sprintf("%s: %v", e.Path, rerr))
			case !bytes.Equal(got, want):
				out = append(out, fmt.Sprintf("%s holds %s, want %s", e.Path, show(string(got)), show(string(want))))
			}
		} else if e.Size != nil && info.Size() != *e.Size {
			out = append(out, fmt.Sprintf("%s has %d bytes, want %d", e.Path, info.Size(), *e.Size))
		}
	}
	return out
}

// checkExactly compares everything beneath dir with want.
func checkExactly(area, dir string, want []string) []string {
	p, err := areaPath(area, dir)
	if err != nil {
		return []string{err.Error()}
	}
	var got []string
	err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if q != p {
			rel, _ := filepath.Rel(p, q)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", dir, err)}
	}
	want = slices.Clone(want)
	slices.Sort(want)
	slices.Sort(got)
	if slices.Equal(got, want) {
		return nil
	}
	var extra, missing []string
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	return []string{fmt.Sprintf("%s holds %q; unexpected %q, missing %q", dir, got, extra, missing)}
}

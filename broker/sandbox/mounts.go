// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"bufio"
	"os"
	"path"
	"strconv"
	"strings"
)

// mountInfo is the kernel's list of the mounts this process sees (Linux).
const mountInfo = "/proc/self/mountinfo"

// mountEntry is one mount of mountInfo: the file system's device
// ("major:minor"), the directory of that file system it shows (its root,
// from the file system's own root) and where it is mounted.
type mountEntry struct {
	dev, root, point string
}

// mountTable is the mounts in mountInfo's order: a mount listed later at
// the same point is mounted over an earlier one.
type mountTable []mountEntry

// readMounts reads mountInfo; nil where it cannot be read (not Linux), so
// that no mount is known.
func readMounts() mountTable {
	f, err := os.Open(mountInfo)
	if err != nil {
		return nil
	}
	defer f.Close()
	var t mountTable
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS ... - TYPE SOURCE OPTIONS
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		t = append(t, mountEntry{dev: fields[2], root: unescapeMountPath(fields[3]), point: unescapeMountPath(fields[4])})
	}
	if sc.Err() != nil {
		return nil
	}
	return t
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space,
// \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// at returns the mount that shows p (absolute, clean): of those whose
// mount point is p or an ancestor of it, the deepest, and of those at that
// point the last listed.
func (t mountTable) at(p string) (mountEntry, bool) {
	var (
		found mountEntry
		ok    bool
	)
	for _, m := range t {
		if within(p, m.point) && (!ok || len(m.point) >= len(found.point)) {
			found, ok = m, true
		}
	}
	return found, ok
}

// showing returns the mount point of a mount at or under the directory w
// (resolved) that shows a directory of the file system of ro (resolved)
// which holds ro or lies in it: through it, a path under w leads to ro or
// into it. "" when there is none, or when the mounts are not known.
func (t mountTable) showing(ro, w string) string {
	home, ok := t.at(ro)
	if !ok {
		return ""
	}
	// ro's place in its file system.
	inFS := path.Join(home.root, strings.TrimPrefix(ro, home.point))
	for _, m := range t {
		if !within(m.point, w) || m.dev != home.dev {
			continue
		}
		if top, _ := t.at(m.point); top != m {
			continue // mounted over: nothing shows it
		}
		if within(inFS, m.root) || within(m.root, inFS) {
			return m.point
		}
	}
	return ""
}

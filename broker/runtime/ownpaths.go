// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// OwnPath is one of the broker's own files or directories (its state, audit
// trail, policies, configuration) and the setting that names it.
type OwnPath struct {
	Setting string // "--state-dir", "config FILE: /audit/dir", ...
	Path    string
	Fix     string // how to move it: "set --state-dir to ..."
}

// rootAt is a resolved root and the setting that names it.
type rootAt struct {
	setting string // "--root DIR:rw", "config FILE: /roots/0"
	root    roots.Root
}

// maxLinkHops bounds the links followed while resolving a path that does not
// exist yet (the kernel's own bound is 40).
const maxLinkHops = 40

// buildRoots resolves specs and refuses a set in which a root holds one of
// the broker's own paths or lies inside one (checkOutsideRoots), at Open and
// at every reload.
func (rt *Runtime) buildRoots(specs []roots.Spec) (*roots.Set, error) {
	set, err := roots.New(specs)
	if err != nil {
		var cerr *ConfigError
		if errors.As(err, &cerr) {
			return nil, err
		}
		return nil, &ConfigError{msg: err.Error()}
	}
	all := make([]rootAt, len(specs))
	for i, r := range set.All() { // in the order of specs
		all[i] = rootAt{setting: specs[i].Origin, root: r}
	}
	if err := checkOutsideRoots(rt.ownPaths(), all); err != nil {
		return nil, err
	}
	return set, nil
}

// ownPaths are Config.OwnPaths, or the paths the Config names.
func (rt *Runtime) ownPaths() []OwnPath {
	cfg := rt.cfg
	if cfg.OwnPaths != nil {
		return cfg.OwnPaths
	}
	named := []OwnPath{{Setting: "the state directory", Path: cfg.StateDir},
		{Setting: "the audit directory", Path: cfg.Audit.Dir}, // "": inside the state directory
		{Setting: "the policy directory", Path: cfg.Policies.Dir}, {Setting: "the policy bundle", Path: cfg.Policies.Bundle},
		{Setting: "the policy bundle's key", Path: cfg.Policies.BundleKey}, {Setting: "the config file", Path: cfg.ConfigFile}}
	var out []OwnPath
	for _, p := range named {
		if p.Path != "" {
			p.Fix = "move it"
			out = append(out, p)
		}
	}
	return out
}

// checkOutsideRoots refuses a configuration in which one of the broker's own
// paths lies inside a root, or a root inside one of them, read-only roots
// included (a server must neither change nor read the audit keys, the grants
// or the policies). Paths are compared symlink-resolved (a path not made yet
// by its deepest existing ancestor), and by identity: each own path's
// ancestors are compared, by device and inode, with every root's directory
// as it was resolved (roots.Root.ID), and each root's ancestors with every
// own path, so that a bind mount or a link cannot hide the overlap. The
// error is a *ConfigError naming both settings and paths, and how to fix it.
func checkOutsideRoots(own []OwnPath, rs []rootAt) error {
	type resolvedOwn struct {
		OwnPath
		real     string       // symlink-resolved
		existing string       // its deepest existing ancestor (itself when it exists)
		id       roots.FileID // its identity, when it exists
	}
	byID := make(map[roots.FileID]int, len(rs))
	for i, r := range rs {
		if r.root.ID.Known() {
			byID[r.root.ID] = i
		}
	}
	owns := make([]resolvedOwn, 0, len(own))
	for _, o := range own {
		real, existing, err := resolveExisting(o.Path)
		if err != nil {
			return configErrorf("%s %s: %v", o.Setting, o.Path, err)
		}
		ro := resolvedOwn{OwnPath: o, real: real, existing: existing}
		if real == existing {
			if fi, err := os.Stat(real); err == nil {
				ro.id = roots.FileIDOf(fi)
			}
		}
		owns = append(owns, ro)
	}
	for _, o := range owns {
		for _, r := range rs {
			switch {
			case within(o.real, r.root.Path):
				return ownInsideRoot(o.OwnPath, o.real, r, "")
			case within(r.root.Path, o.real):
				return rootInsideOwn(r, o.OwnPath, o.real, "")
			}
		}
	}
	// By identity: the same directories under other names.
	for _, o := range owns {
		for dir := o.existing; dir != ""; dir = parentDir(dir) {
			fi, err := os.Stat(dir)
			if err != nil {
				continue
			}
			if i, ok := byID[roots.FileIDOf(fi)]; ok {
				return ownInsideRoot(o.OwnPath, o.real, rs[i], " ("+dir+" is that root's directory, by device and inode: a bind mount or a link)")
			}
		}
	}
	for _, r := range rs {
		for dir := r.root.Path; dir != ""; dir = parentDir(dir) {
			fi, err := os.Stat(dir)
			if err != nil {
				continue
			}
			id := roots.FileIDOf(fi)
			for _, o := range owns {
				if o.id.Known() && o.id == id {
					return rootInsideOwn(r, o.OwnPath, o.real, " ("+dir+" is that directory, by device and inode: a bind mount or a link)")
				}
			}
		}
	}
	return nil
}

// ownInsideRoot is the error of an own path inside a root.
func ownInsideRoot(o OwnPath, real string, r rootAt, how string) error {
	return configErrorf("%s %s lies inside the root %s (%s)%s: a server could read or change the broker's own "+
		"state through it (consent grants, audit trail and keys, policies, configuration); %s, outside every root",
		o.Setting, spelled(o.Path, real), r.setting, r.root.Path, how, o.Fix)
}

// rootInsideOwn is the error of a root inside an own path.
func rootInsideOwn(r rootAt, o OwnPath, real string, how string) error {
	return configErrorf("the root %s (%s) lies inside %s %s%s: a server could read or change the broker's own "+
		"state through it (consent grants, audit trail and keys, policies, configuration); %s, outside every root, "+
		"or give a root outside it", r.setting, r.root.Path, o.Setting, spelled(o.Path, real), how, o.Fix)
}

// spelled is a path as written, with what it resolves to when that differs.
func spelled(written, real string) string {
	if abs, err := filepath.Abs(written); err == nil && abs == real {
		return real
	}
	return written + " (" + real + ")"
}

// within reports whether path is dir or lies beneath it (both clean and
// absolute), at a separator.
func within(path, dir string) bool {
	if path == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(path, dir)
}

// parentDir is dir's parent, "" above the file system's root.
func parentDir(dir string) string {
	p := filepath.Dir(dir)
	if p == dir {
		return ""
	}
	return p
}

// resolveExisting returns path absolute and symlink-resolved, and its
// deepest existing ancestor (resolved; the path itself when it exists). The
// part that does not exist yet is kept as written; a dangling link on the
// way is followed to where it points, as creating the path would.
func resolveExisting(path string) (real, existing string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	var rest []string // the names below cur, innermost last
	cur := abs
	for hops := 0; ; {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("resolve: %w", err)
		}
		if target, lerr := os.Readlink(cur); lerr == nil {
			// A dangling link: what would be made is its target.
			if hops++; hops > maxLinkHops {
				return "", "", errors.New("resolve: too many links")
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(cur), target)
			}
			cur = filepath.Clean(target)
			continue
		}
		parent := parentDir(cur)
		if parent == "" {
			return abs, "", nil
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

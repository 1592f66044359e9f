// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tree is what the targets serve, made fresh for each fsbench run: a root
// "data" for every workload but the paged listing, the first-touch and the
// serve ones; a root "big" that holds only the large directory, served only
// in the paged run (so that whatever a target does with a whole root at
// start, such as fsbroker's sweep for stale temporary files, weighs on that
// run alone), and a small directory listed once before it, so that the
// child's first page of the large directory is measured warm (see
// runPages); and a root "repo", served in the first-touch and serve
// workloads, whose files and directories each run requests once, as an
// agent reading a repository through does (fsbroker's sweep walks it at
// each start, as it would a user's repository). The roots' base names are
// the mounts of fsbroker's and fsbaseline's paths.
//
//	data/r1k/, r64k/, r1m/  files to read: cfg.files of each size, ASCII text
//	data/w/                 files to overwrite, cfg.files per target (4 KiB)
//	data/l1000/             cfg.listN small files (files/list)
//	big/lbig/               cfg.bigN empty files (the paged listing)
//	big/lwarm/              warmFiles empty files (listed once before it)
//	repo/f/dNNNN/           cfg.first files of 1 KiB, firstPerDir a directory
//	repo/l/dNNNNN/          cfg.firstDirs directories of cfg.firstList empty files
type tree struct {
	root     string // data: absolute, symlinks resolved
	bigRoot  string // big: the same
	repoRoot string // repo: the same

	// The paths of repo's files and listed directories, relative to it,
	// in the order the first-touch and serve workloads request them.
	firstFiles, firstDirs []string
}

// firstPerDir is how many of the first-touch workloads' files share a directory.
const firstPerDir = 100

// warmFiles is how many files the directory listed before the paged listing
// holds.
const warmFiles = 10

// readDir is the tree's directory of files of size bytes.
func readDir(size int) string {
	switch {
	case size >= 1<<20 && size%(1<<20) == 0:
		return fmt.Sprintf("r%dm", size>>20)
	case size >= 1<<10 && size%(1<<10) == 0:
		return fmt.Sprintf("r%dk", size>>10)
	}
	return fmt.Sprintf("r%d", size)
}

// lineLen is the length of textOfSize's lines, newline included.
const lineLen = 68

// textOfSize returns size bytes of ASCII text in lines of lineLen bytes: JSON
// escapes one byte a line (the newline), as it would in source code.
func textOfSize(size int) []byte {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "%06d the quick brown fox jumps over the lazy dog, again and again\n", i)
	}
	return []byte(b.String()[:size])
}

// filePaths returns n tree-relative paths in dir.
func filePaths(dir, prefix string, n int) []string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/%s%06d.txt", dir, prefix, i)
	}
	return paths
}

// makeTree creates the tree in parent for cfg and targets.
func makeTree(parent string, cfg *config, targets []*target) (*tree, error) {
	t := &tree{}
	for _, r := range []struct {
		name string
		dir  *string
	}{{"data", &t.root}, {"big", &t.bigRoot}, {"repo", &t.repoRoot}} {
		dir := filepath.Join(parent, r.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		dir, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return nil, err
		}
		*r.dir = dir
	}
	root := t.root
	fill := func(paths []string, content []byte) error {
		for _, p := range paths {
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(p)), content, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	mkdir := func(dir string) error { return os.MkdirAll(filepath.Join(root, dir), 0o755) }
	for _, size := range readSizes {
		if err := mkdir(readDir(size)); err != nil {
			return nil, err
		}
		if err := fill(filePaths(readDir(size), "f", cfg.files), textOfSize(size)); err != nil {
			return nil, err
		}
	}
	if err := mkdir("w"); err != nil {
		return nil, err
	}
	for _, tg := range targets {
		if err := fill(filePaths("w", tg.name+"-", cfg.files), textOfSize(writeSize)); err != nil {
			return nil, err
		}
	}
	if err := mkdir("l1000"); err != nil {
		return nil, err
	}
	if err := fill(filePaths("l1000", "f", cfg.listN), []byte("x\n")); err != nil {
		return nil, err
	}
	if cfg.onceSelected() {
		if err := t.makeRepo(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.bigN > 0 {
		for _, dir := range []string{"lbig", "lwarm"} {
			if err := os.Mkdir(filepath.Join(t.bigRoot, dir), 0o755); err != nil {
				return nil, err
			}
		}
		for _, p := range append(filePaths("lbig", "f", cfg.bigN), filePaths("lwarm", "f", warmFiles)...) {
			f, err := os.OpenFile(filepath.Join(t.bigRoot, filepath.FromSlash(p)), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
			if err != nil {
				return nil, err
			}
			f.Close()
		}
	}
	return t, nil
}

// makeRepo fills the repo root: cfg.first files of 1 KiB and cfg.firstDirs
// directories of cfg.firstList empty files, and sets their paths in the
// order they are requested (the files one directory after another; within
// one, in name order, as a reader of a repository goes).
func (t *tree) makeRepo(cfg *config) error {
	text := textOfSize(1 << 10)
	for i := range cfg.first {
		dir := fmt.Sprintf("f/d%04d", i/firstPerDir)
		if i%firstPerDir == 0 {
			if err := os.MkdirAll(filepath.Join(t.repoRoot, filepath.FromSlash(dir)), 0o755); err != nil {
				return err
			}
		}
		rel := fmt.Sprintf("%s/f%06d.txt", dir, i)
		if err := os.WriteFile(filepath.Join(t.repoRoot, filepath.FromSlash(rel)), text, 0o644); err != nil {
			return err
		}
		t.firstFiles = append(t.firstFiles, rel)
	}
	for i := range cfg.firstDirs {
		rel := fmt.Sprintf("l/d%05d", i)
		dir := filepath.Join(t.repoRoot, filepath.FromSlash(rel))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for j := range cfg.firstList {
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("e%04d.txt", j)), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			f.Close()
		}
		t.firstDirs = append(t.firstDirs, rel)
	}
	return nil
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
)

// demoWidth is the width every line the demo prints fits in.
const demoWidth = 100

// wrapWriter writes each line written to it to w, wrapped to width columns:
// broken at the last space that fits, else (a word longer than a line) at
// the width; continuation lines are indented 6 columns more than the line.
// It is safe for concurrent use; a line is written once its newline comes.
type wrapWriter struct {
	mu    sync.Mutex
	w     io.Writer
	width int
	line  []byte
}

// Write implements io.Writer.
func (ww *wrapWriter) Write(p []byte) (int, error) {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	for _, b := range p {
		if b != '\n' {
			ww.line = append(ww.line, b)
			continue
		}
		var out strings.Builder
		for _, l := range wrapLine(string(ww.line), ww.width) {
			out.WriteString(l + "\n")
		}
		ww.line = ww.line[:0]
		if _, err := io.WriteString(ww.w, out.String()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// wrapLine wraps line to width columns (see wrapWriter).
func wrapLine(line string, width int) []string {
	line = strings.TrimRight(line, " ")
	if utf8.RuneCountInString(line) <= width {
		return []string{line}
	}
	indent := min(len(line)-len(strings.TrimLeft(line, " "))+6, width/4)
	var out []string
	rest := []rune(line)
	for first := true; len(rest) > 0; first = false {
		prefix := ""
		if !first {
			prefix = strings.Repeat(" ", indent)
			rest = []rune(strings.TrimLeft(string(rest), " "))
		}
		room := width - len(prefix)
		if len(rest) <= room {
			out = append(out, prefix+string(rest))
			break
		}
		cut := room
		for i := room; i > 0; i-- {
			if rest[i] == ' ' && strings.TrimSpace(string(rest[:i])) != "" {
				cut = i
				break
			}
		}
		out = append(out, strings.TrimRight(prefix+string(rest[:cut]), " "))
		rest = rest[cut:]
	}
	return out
}

// printDemoTrail prints the records of the trail in trailDir for the demo:
// kind, method (the fsbroker serve tool in its place, when the record names
// one), result and code, then the paths (relative to dir) and the reasons or
// detail, each row wrapped to demoWidth.
func printDemoTrail(ctx context.Context, w io.Writer, trailDir, dir string) error {
	r, err := audit.NewReader(trailDir, audit.Filter{})
	if err != nil {
		return fmt.Errorf("the demo's audit trail: %w", err)
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  KIND\tMETHOD\tRESULT\tCODE\tPATHS: REASONS OR DETAIL")
	for e, err := range r.Entries(ctx) {
		if err != nil {
			return fmt.Errorf("the demo's audit trail: %w", err)
		}
		rec := &e.Record
		result := rec.Outcome
		if rec.Allow != nil {
			result = map[bool]string{true: "allow", false: "deny"}[*rec.Allow]
		}
		paths := make([]string, len(rec.Paths))
		for i, p := range rec.Paths {
			if rel, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(rel, "..") {
				p = rel
			}
			paths[i] = cell(p)
		}
		details := rec.Reasons
		if len(details) == 0 && rec.Detail != "" {
			details = []string{rec.Detail}
		}
		what := cells(details, "; ")
		switch {
		case len(paths) > 0 && len(details) > 0:
			what = strings.Join(paths, ", ") + ": " + what
		case len(paths) > 0:
			what = strings.Join(paths, ", ")
		}
		method := rec.Method
		if rec.Tool != "" {
			method = rec.Tool
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cell(string(rec.Kind)), cell(method), cell(result), cell(rec.Code), what)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = io.WriteString(w, table.String())
	return err
}

// demoConsent is the demo's consent provider: it asks the provider it wraps
// and keeps, for the demo's report, why the paths it was not asked about
// were left out.
type demoConsent struct {
	consent.Provider
	report *serverReport
}

// Ask implements consent.Provider.
func (d *demoConsent) Ask(ctx context.Context, req consent.Request) (consent.Decision, error) {
	var why []string
	for _, r := range req.Removed {
		why = append(why, fmt.Sprintf("%s (%s)", cell(r.Path), r.Reason))
	}
	if len(why) > 0 {
		d.report.explainNextConsent("       not approvable: " + strings.Join(why, "; "))
	}
	return d.Provider.Ask(ctx, req)
}

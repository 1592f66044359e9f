// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Command syscount counts the system calls a broker makes per first-touch
// files/read, with strace(1): it runs the target under `strace -f -c` twice,
// once sending -n's first count of sequential files/read requests of
// distinct files and once its second, and prints per system call the
// difference of the two counts divided by the difference of the request
// counts, so that start-up and shutdown cancel out (docs/performance.md,
// "First touch (issue 21)").
//
// The target speaks fsbroker's wire over stdio (it sends initialize; see
// bench/fsbaseline): `fsbroker stdio` or bench/fsbaseline. Each run gets a
// fresh root of files of -size bytes, -per-dir to a directory, each read once,
// a fresh state directory and a config listing the root as pre-approved.
//
// Usage:
//
//	go build -o bin/ ./cmd/fsbroker ./bench/fsbaseline
//	go run ./bench/syscount -- bin/fsbroker stdio --config {config} --state-dir {state} --rate-limit 0
//	go run ./bench/syscount -- bin/fsbaseline --root {root}
//
// {root}, {config} and {state} in the command are replaced by the run's
// root, config file and state directory.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	counts := flag.String("n", "2000,12000", "the two request counts, comma-separated")
	size := flag.Int("size", 1024, "bytes per file")
	perDir := flag.Int("per-dir", 100, "files per directory")
	stracePath := flag.String("strace", "strace", "the strace binary")
	keep := flag.Bool("keep", false, "keep the runs' directories and strace outputs")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: syscount [flags] -- COMMAND ARGS... ({root}, {config}, {state} are replaced)")
		os.Exit(2)
	}
	var ns [2]int
	parts := strings.Split(*counts, ",")
	for i := range ns {
		if len(parts) != 2 {
			fmt.Fprintln(os.Stderr, "syscount: -n takes two counts")
			os.Exit(2)
		}
		n, err := strconv.Atoi(strings.TrimSpace(parts[i]))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "syscount: bad count %q\n", parts[i])
			os.Exit(2)
		}
		ns[i] = n
	}
	if ns[1] <= ns[0] {
		fmt.Fprintln(os.Stderr, "syscount: the second count must be larger")
		os.Exit(2)
	}
	var calls [2]map[string]int
	for i, n := range ns {
		c, err := run(*stracePath, flag.Args(), n, *size, *perDir, *keep)
		if err != nil {
			fmt.Fprintf(os.Stderr, "syscount: run of %d reads: %v\n", n, err)
			os.Exit(1)
		}
		calls[i] = c
	}
	report(os.Stdout, calls, ns)
}

// run makes a fresh root of n files, runs the command under strace, reads
// every file once and returns strace's call counts.
func run(stracePath string, command []string, n, size, perDir int, keep bool) (map[string]int, error) {
	dir, err := os.MkdirTemp("", "syscount-")
	if err != nil {
		return nil, err
	}
	if !keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "syscount: keeping", dir)
	}
	root := filepath.Join(dir, "root")
	content := bytes.Repeat([]byte("x"), size)
	rels := make([]string, n)
	for i := range n {
		d := fmt.Sprintf("d%04d", i/perDir)
		if i%perDir == 0 {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				return nil, err
			}
		}
		rels[i] = fmt.Sprintf("%s/f%06d.txt", d, i)
		if err := os.WriteFile(filepath.Join(root, rels[i]), content, 0o644); err != nil {
			return nil, err
		}
	}
	config := filepath.Join(dir, "config.yaml")
	doc, _ := json.Marshal(map[string]any{"version": 1, "roots": []map[string]any{
		{"path": root, "writable": true, "consent": "preapproved"}}}) // JSON is YAML
	if err := os.WriteFile(config, doc, 0o600); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "strace.txt")
	args := []string{"-f", "-c", "-o", out, "--"}
	for _, a := range command {
		a = strings.ReplaceAll(a, "{root}", root)
		a = strings.ReplaceAll(a, "{config}", config)
		a = strings.ReplaceAll(a, "{state}", filepath.Join(dir, "state"))
		args = append(args, a)
	}
	cmd := exec.Command(stracePath, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	derr := drive(stdin, bufio.NewReaderSize(stdout, 1<<20), filepath.Base(root), rels, size)
	_ = stdin.Close()
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	if derr != nil {
		return nil, derr
	}
	if werr != nil {
		return nil, fmt.Errorf("the target: %w", werr)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	return parseStrace(text)
}

// drive answers the target's initialize, then sends one files/read per
// path, each after the reply to the one before, and checks every reply.
func drive(w io.Writer, r *bufio.Reader, mount string, rels []string, size int) error {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("waiting for initialize: %w", err)
	}
	var init struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &init); err != nil || init.Method != "initialize" {
		return fmt.Errorf("first message is not initialize: %.300s", line)
	}
	reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": init.ID, "result": map[string]any{
		"protocolVersion": init.Params.ProtocolVersion,
		"capabilities":    map[string]any{},
		"serverInfo":      map[string]any{"name": "syscount", "version": "dev"},
	}})
	if _, err := w.Write(append(reply, '\n')); err != nil {
		return err
	}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("waiting for notifications/initialized: %w", err)
		}
		var m struct{ Method string }
		if json.Unmarshal(line, &m) == nil && m.Method == "notifications/initialized" {
			break
		}
	}
	for i, rel := range rels {
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "files/read",
			"params": map[string]any{"path": mount + "/" + rel}})
		if _, err := w.Write(append(req, '\n')); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return fmt.Errorf("waiting for the reply to read %d: %w", i+1, err)
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Error  json.RawMessage `json:"error"`
				Result struct {
					Size int `json:"size"`
				} `json:"result"`
			}
			if err := json.Unmarshal(line, &m); err != nil {
				return fmt.Errorf("reply to read %d: %w", i+1, err)
			}
			if m.Method != "" || string(m.ID) != strconv.Itoa(i+1) {
				continue // a notification or the target's own request
			}
			if len(m.Error) > 0 && string(m.Error) != "null" {
				return fmt.Errorf("read %d (%s) failed: %s", i+1, rel, m.Error)
			}
			if m.Result.Size != size {
				return fmt.Errorf("read %d (%s): size %d, want %d", i+1, rel, m.Result.Size, size)
			}
			break
		}
	}
	return nil
}

// parseStrace reads the calls column of `strace -c`'s table.
func parseStrace(text []byte) (map[string]int, error) {
	calls := map[string]int{}
	for line := range strings.SplitSeq(string(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[len(f)-1] == "total" || f[len(f)-1] == "syscall" {
			continue
		}
		// % time, seconds, usecs/call, calls, [errors,] syscall
		n, err := strconv.Atoi(f[3])
		if err != nil {
			continue
		}
		calls[f[len(f)-1]] = n
	}
	if len(calls) == 0 {
		return nil, errors.New("no system calls in strace's output")
	}
	return calls, nil
}

// report prints each call's count per read, largest first.
func report(w io.Writer, calls [2]map[string]int, ns [2]int) {
	per := map[string]float64{}
	for name, c := range calls[1] {
		per[name] = float64(c-calls[0][name]) / float64(ns[1]-ns[0])
	}
	for name, c := range calls[0] {
		if _, ok := calls[1][name]; !ok {
			per[name] = float64(-c) / float64(ns[1]-ns[0])
		}
	}
	names := make([]string, 0, len(per))
	total := 0.0
	for name, v := range per {
		names = append(names, name)
		total += v
	}
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case per[a] > per[b]:
			return -1
		case per[a] < per[b]:
			return 1
		}
		return strings.Compare(a, b)
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "system call\tper read\t\n")
	for _, name := range names {
		if v := per[name]; v >= 0.005 || v <= -0.005 {
			fmt.Fprintf(tw, "%s\t%.2f\t\n", name, v)
		}
	}
	fmt.Fprintf(tw, "total\t%.2f\t\n", total)
	_ = tw.Flush()
}

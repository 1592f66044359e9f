// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// promptSlot lets one prompt at a time use the terminal, across every Prompt
// in the process: several sessions may ask at once, and two conversations on
// one terminal would mix their questions and steal each other's answers.
var promptSlot = make(chan struct{}, 1)

// Prompt asks the person at the controlling terminal.
type Prompt struct {
	timeout time.Duration
	held    *HeldOutput // held while a question is on the terminal; nil: none
}

// NewPrompt returns the terminal prompt provider. It fails where the prompt
// is not available (Windows); a Unix process without a terminal gets a
// provider whose every answer is ErrNoTerminal.
func NewPrompt(opts ...Option) (*Prompt, error) {
	if !promptSupported {
		return nil, errPromptUnsupported
	}
	o := newOptions(opts)
	return &Prompt{timeout: o.timeout, held: o.held}, nil
}

// Ask shows the request on the controlling terminal and returns the paths the
// person approves. No terminal, no answer in time, or the terminal closing
// approve nothing and return an error.
func (p *Prompt) Ask(ctx context.Context, req Request) (Decision, error) {
	d := Decision{Provider: NamePrompt}
	req, err := req.normalize()
	if err != nil {
		return d, err
	}
	if len(req.Paths) == 0 {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	select {
	case promptSlot <- struct{}{}:
	case <-ctx.Done():
		return d, fmt.Errorf("consent prompt: waiting for another prompt to finish: %w", ctx.Err())
	}
	defer func() { <-promptSlot }()
	// The log goes to the terminal too, as a rule: none of it may land in
	// the middle of the question (or pass for part of it).
	p.held.hold()
	defer p.held.release()

	f, err := openTerminal()
	if err != nil {
		return d, fmt.Errorf("%w: %v", ErrNoTerminal, err)
	}
	t := &terminal{f: f, r: bufio.NewReaderSize(f, 512)}
	defer f.Close()
	ended := Waiting(ctx, NamePrompt, req)
	defer ended(true)
	// Where the terminal supports deadlines (Linux always), a cancelled read
	// returns at once; elsewhere it is left behind (see readLine).
	t.deadlines = f.SetReadDeadline(time.Time{}) == nil
	if dl, ok := ctx.Deadline(); ok && t.deadlines {
		_ = f.SetWriteDeadline(dl)
	}

	approved, err := converse(ctx, t, req)
	if err != nil {
		if t.deadlines {
			_ = f.SetWriteDeadline(time.Now().Add(time.Second))
		}
		switch cerr := ctx.Err(); {
		case errors.Is(cerr, context.DeadlineExceeded):
			_ = t.say("\nfsbroker: no answer in time; nothing approved.\n")
			return d, fmt.Errorf("consent prompt: no answer within the time limit: %w", cerr)
		case cerr != nil:
			_ = t.say("\nfsbroker: the request was withdrawn; nothing approved.\n")
			return d, fmt.Errorf("consent prompt: %w", cerr)
		}
		return d, fmt.Errorf("consent prompt: %w", err)
	}
	d.Approved = keep(req.Paths, approved)
	_ = t.say(fmt.Sprintf("fsbroker: approved %d of %d path(s) for %s access.\n\n", len(d.Approved), len(req.Paths), req.Access))
	return d, nil
}

// converse shows the request and asks for the answer: all (y, yes, a, all),
// none (n, no, none, Enter), or one by one (s). Anything else asks again;
// nothing but a clear yes approves.
func converse(ctx context.Context, t *terminal, req Request) ([]string, error) {
	if err := t.say(render(req)); err != nil {
		return nil, err
	}
	// Keys typed before the question was shown (into a shell, or ahead by
	// accident) must not answer it.
	flushInput(t.f)
	for {
		if err := t.say("Approve? [y] yes, all  [n] no, none  [s] choose one by one  (Enter: none): "); err != nil {
			return nil, err
		}
		line, err := t.readLine(ctx)
		if err != nil {
			return nil, err
		}
		switch strings.ToLower(line) {
		case "y", "yes", "a", "all":
			return req.Paths, nil
		case "", "n", "no", "none":
			return nil, nil
		case "s", "c", "choose", "select":
			return choose(ctx, t, req)
		}
		if err := t.say("Please type y, n or s, then Enter.\n"); err != nil {
			return nil, err
		}
	}
}

// choose asks about each path in turn.
func choose(ctx context.Context, t *terminal, req Request) ([]string, error) {
	var approved []string
	for i := 0; i < len(req.Paths); {
		path := req.Paths[i]
		if err := t.say(fmt.Sprintf("  %d/%d %s  approve %s? [y/n] (Enter: no): ", i+1, len(req.Paths), showPath(path), req.Access)); err != nil {
			return nil, err
		}
		line, err := t.readLine(ctx)
		if err != nil {
			return nil, err
		}
		switch strings.ToLower(line) {
		case "y", "yes":
			approved = append(approved, path)
		case "", "n", "no":
		default:
			if err := t.say("  Please type y or n, then Enter.\n"); err != nil {
				return nil, err
			}
			continue
		}
		i++
	}
	return approved, nil
}

// render is the request as the person reads it. Everything the server chose
// (its declared name and version, its message, the paths) is shown so that
// it cannot act on the terminal or pass for fsbroker's own text: names are
// quoted and escaped, the message is stripped of control characters and
// escapes, cut, and each of its lines is marked as the server's.
func render(req Request) string {
	var b strings.Builder
	b.WriteString("\n=== fsbroker: an MCP server asks for file access ===\n")
	decl := quoted(req.Server.Name)
	if req.Server.Version != "" {
		decl += " version " + quoted(req.Server.Version)
	}
	if req.Server.Pinned {
		fmt.Fprintf(&b, "Server:  %s (identity pinned by the operator)\n", quoted(req.Server.ID))
		fmt.Fprintf(&b, "         declares itself %s\n", decl)
	} else {
		fmt.Fprintf(&b, "Server:  %s\n", decl)
		b.WriteString("         UNVERIFIED: this name is only what the server says it is;\n")
		b.WriteString("         any program can claim it.\n")
	}
	if req.Access == AccessWrite {
		b.WriteString("Access:  write (read, create, change and delete)\n")
	} else {
		b.WriteString("Access:  read\n")
	}
	fmt.Fprintf(&b, "Paths:   %d, each with everything beneath it:\n", len(req.Paths))
	for i, p := range req.Paths {
		fmt.Fprintf(&b, "  %d. %s", i+1, showPath(p))
		if root, ok := req.rootOf(p); ok {
			fmt.Fprintf(&b, "   (root %s at %s", quoted(root.Name), showPath(root.Path))
			if !root.Writable {
				b.WriteString(", read-only")
			}
			b.WriteString(")")
		}
		b.WriteString("\n")
	}
	writeRemoved(&b, req.Removed)
	lines, truncated := messageLines(req.Message)
	if len(lines) == 0 {
		b.WriteString("Message: (none)\n")
	} else {
		b.WriteString("Message from the server (its own words, unverified):\n")
		for _, l := range lines {
			b.WriteString("  | " + l + "\n")
		}
		if truncated {
			b.WriteString("  | [... cut by fsbroker]\n")
		}
	}
	return b.String()
}

// How many removed paths the prompt lists (it counts the others), and how
// much of each path it shows.
const (
	maxRemovedShown     = 20
	maxRemovedPathRunes = 200
)

// writeRemoved lists the requested paths that are not asked about, each with
// why, the path escaped and cut as the server chose it, the reason stripped
// and cut (a policy's reason may quote what the server sent).
func writeRemoved(b *strings.Builder, removed []Removed) {
	if len(removed) == 0 {
		return
	}
	fmt.Fprintf(b, "Not asked: %d requested path(s) that cannot be granted:\n", len(removed))
	for i, r := range removed {
		if i == maxRemovedShown {
			fmt.Fprintf(b, "  - and %d more\n", len(removed)-i)
			break
		}
		fmt.Fprintf(b, "  - %s: %s\n", showPath(cutRunes(r.Path, maxRemovedPathRunes)), oneLine(r.Reason, 200))
	}
}

// cutRunes is s cut to n characters, "..." marking a cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

// terminal is an open controlling terminal.
type terminal struct {
	f         *os.File
	r         *bufio.Reader
	deadlines bool
}

// say writes s to the terminal.
func (t *terminal) say(s string) error {
	_, err := t.f.WriteString(s)
	return err
}

// maxAnswer is the longest answer line kept; longer lines are not an answer.
const maxAnswer = 64

type lineResult struct {
	line string
	err  error
}

// readLine returns the next line typed, trimmed, or ctx's error once it is
// done. The read runs in its own goroutine; when ctx ends first, a terminal
// with deadlines has its read stopped and waited for, and one without (kqueue
// does not take every terminal) is left behind to end with the next line or
// when the file is closed.
func (t *terminal) readLine(ctx context.Context) (string, error) {
	ch := make(chan lineResult, 1)
	go func() {
		var line []byte
		for {
			chunk, err := t.r.ReadSlice('\n')
			if len(line) <= maxAnswer {
				line = append(line, chunk...)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				ch <- lineResult{err: fmt.Errorf("reading the terminal: %w", err)}
				return
			}
			break
		}
		if len(line) > maxAnswer {
			ch <- lineResult{line: "?"}
			return
		}
		ch <- lineResult{line: strings.TrimSpace(string(line))}
	}()
	select {
	case r := <-ch:
		if r.err != nil && ctx.Err() != nil {
			return "", ctx.Err()
		}
		return r.line, r.err
	case <-ctx.Done():
		if t.deadlines {
			_ = t.f.SetReadDeadline(time.Now())
			<-ch
		}
		return "", ctx.Err()
	}
}

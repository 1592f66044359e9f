// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// queueWait bounds the tests' waits for a request to reach the queue.
const queueWait = 10 * time.Second

// askResult is one Ask's outcome, from a goroutine or a helper process.
type askResult struct {
	Approved []string `json:"approved"`
	Provider string   `json:"provider"`
	Error    string   `json:"error"`
}

// asking runs c.Ask(req) on a goroutine and returns where its result comes.
func asking(ctx context.Context, c *Console, req Request) <-chan askResult {
	done := make(chan askResult, 1)
	go func() {
		d, err := c.Ask(ctx, req)
		r := askResult{Approved: d.Approved, Provider: d.Provider}
		if err != nil {
			r.Error = err.Error()
		}
		done <- r
	}()
	return done
}

// awaitPending waits until the queue holds n requests waiting, and returns
// them.
func awaitPending(t *testing.T, q *Queue, n int) []QueuedRequest {
	t.Helper()
	deadline := time.Now().Add(queueWait)
	for {
		rs, err := q.Pending(time.Now())
		if err != nil {
			t.Fatalf("pending: %v", err)
		}
		if len(rs) >= n {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests waiting after %v, want %d", len(rs), queueWait, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// result waits for an Ask's result.
func result(t *testing.T, done <-chan askResult) askResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(queueWait):
		t.Fatalf("Ask did not return within %v", queueWait)
	}
	return askResult{}
}

// queueFiles lists the files left in the queue directory.
func queueFiles(t *testing.T, q *Queue) []string {
	t.Helper()
	des, err := os.ReadDir(q.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// consoleOn returns a fresh state directory, a console provider on it
// (with opts) and its queue, as the console opens it.
func consoleOn(t *testing.T, opts ...Option) (string, *Console, *Queue) {
	t.Helper()
	state := t.TempDir()
	c, err := NewConsole(state, opts...)
	if err != nil {
		t.Fatal(err)
	}
	q, err := OpenQueue(state)
	if err != nil {
		t.Fatal(err)
	}
	return state, c, q
}

// TestConsoleAnswerReachesTheWaitingBroker: a request put in the queue is
// shown as it was asked, an answer approving some of its paths is what the
// waiting provider returns, and both files are gone afterwards.
func TestConsoleAnswerReachesTheWaitingBroker(t *testing.T) {
	_, c, q := consoleOn(t)
	req := sampleRequest()
	req.Removed = []Removed{{Path: "proj/.env", Reason: "secrets"}}
	done := asking(t.Context(), c, req)
	pending := awaitPending(t, q, 1)[0]
	if !slices.Equal(pending.Request.Paths, req.Paths) || pending.Request.Server != req.Server ||
		pending.Request.Message != req.Message || len(pending.Request.Removed) != 1 || pending.PID != os.Getpid() {
		t.Fatalf("pending = %+v, want the request as asked", pending)
	}
	if left := time.Until(pending.Deadline); left <= 0 || left > DefaultTimeout {
		t.Errorf("deadline %v from now, want within the provider's %v", left, DefaultTimeout)
	}
	if _, err := q.Answer(pending.ID, []string{"proj/c", "proj/a"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := result(t, done)
	if r.Error != "" || !slices.Equal(r.Approved, []string{"proj/a", "proj/c"}) || r.Provider != NameConsole {
		t.Fatalf("Ask = %+v, want proj/a and proj/c by console", r)
	}
	if left := queueFiles(t, q); len(left) != 0 {
		t.Errorf("the queue still holds %q", left)
	}
}

// TestConsoleNoAnswerApprovesNothing: with no console answering, the
// provider's time limit ends the question: nothing approved, an error for
// the log, the request gone from the queue, and an answer that comes later
// refused as for no request.
func TestConsoleNoAnswerApprovesNothing(t *testing.T) {
	_, c, q := consoleOn(t, WithTimeout(300*time.Millisecond))
	done := asking(t.Context(), c, sampleRequest())
	id := awaitPending(t, q, 1)[0].ID
	r := result(t, done)
	if r.Error == "" || !strings.Contains(r.Error, "no answer within the time limit") || len(r.Approved) != 0 {
		t.Fatalf("Ask = %+v, want nothing approved and a time-limit error", r)
	}
	if _, err := q.Answer(id, []string{"proj/a"}, time.Now()); !errors.Is(err, ErrNoRequest) {
		t.Fatalf("a late answer: %v, want ErrNoRequest", err)
	}
	if left := queueFiles(t, q); len(left) != 0 {
		t.Errorf("the queue still holds %q", left)
	}
}

// TestConsoleAnswerForNoWaitingRequest attacks the answer: an id no
// request has, a malformed one, a path that was not asked about, a second
// answer, and an answer after the deadline are all refused, and the
// broker gets the first answer only.
func TestConsoleAnswerForNoWaitingRequest(t *testing.T) {
	_, c, q := consoleOn(t)
	for _, id := range []string{newRequestID(), "", "../../grants/x", strings.Repeat("A", 32)} {
		if _, err := q.Answer(id, nil, time.Now()); !errors.Is(err, ErrNoRequest) {
			t.Errorf("answer to %q: %v, want ErrNoRequest", id, err)
		}
	}
	done := asking(t.Context(), c, sampleRequest())
	p := awaitPending(t, q, 1)[0]
	if _, err := q.Answer(p.ID, []string{"proj"}, time.Now()); !errors.Is(err, ErrNotAsked) {
		t.Errorf("an answer naming the parent proj: %v, want ErrNotAsked", err)
	}
	if _, err := q.Answer(p.ID, []string{"proj/a"}, p.Deadline); !errors.Is(err, ErrNoRequest) {
		t.Errorf("an answer at the deadline: %v, want ErrNoRequest", err)
	}
	if _, err := q.Answer(p.ID, []string{"proj/b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Answer(p.ID, []string{"proj/a", "proj/b", "proj/c"}, time.Now()); !errors.Is(err, ErrAnswered) && !errors.Is(err, ErrNoRequest) {
		t.Errorf("a second answer: %v, want ErrAnswered (or ErrNoRequest once the broker took the first)", err)
	}
	if r := result(t, done); !slices.Equal(r.Approved, []string{"proj/b"}) {
		t.Fatalf("Ask = %+v, want the first answer's proj/b", r)
	}
	if _, err := q.Answer(p.ID, []string{"proj/a"}, time.Now()); !errors.Is(err, ErrNoRequest) {
		t.Errorf("an answer after the broker took its answer: %v, want ErrNoRequest", err)
	}
}

// TestConsoleForgedFilesInTheQueue: request files the broker did not write
// (a malformed one, one naming another id, a symbolic link to a request) are
// not shown; a well-formed one no broker waits on is shown, and its answer
// reaches nobody; an answer file forged for a waiting request that is not
// well-formed approves nothing. Sweep removes what dead brokers left.
func TestConsoleForgedFilesInTheQueue(t *testing.T) {
	state := t.TempDir()
	q, err := OpenQueue(state)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(q.Dir(), name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	forged := QueuedRequest{Version: 1, ID: newRequestID(), Created: now, Deadline: now.Add(time.Minute), PID: 1,
		Request: Request{Server: Server{ID: "forger"}, Paths: []string{"proj/a"}, Access: AccessWrite}}
	b, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	write(requestPrefix+forged.ID+queueExt, string(b))
	other := newRequestID()
	write(requestPrefix+other+queueExt, string(b)) // names forged.ID, not its own
	bad := newRequestID()
	write(requestPrefix+bad+queueExt, `{"version": 1, "id": "`+bad+`", "request": {"paths": []}}`)
	link := newRequestID()
	if err := os.Symlink(requestPrefix+forged.ID+queueExt, filepath.Join(q.Dir(), requestPrefix+link+queueExt)); err != nil {
		t.Fatal(err)
	}
	rs, err := q.Pending(time.Now())
	if len(rs) != 1 || rs[0].ID != forged.ID {
		t.Fatalf("pending = %+v, want the well-formed request alone", rs)
	}
	for _, id := range []string{other, bad, link} {
		if err == nil || !strings.Contains(err.Error(), id) {
			t.Errorf("the error %v does not name the request file %s", err, id)
		}
	}
	for _, id := range []string{other, bad, link} {
		if err := os.Remove(filepath.Join(q.Dir(), requestPrefix+id+queueExt)); err != nil {
			t.Fatal(err)
		}
	}
	// The answer to the forged request is written, and waits for a broker
	// that does not exist: it grants nothing (grants are the broker's).
	if _, err := q.Answer(forged.ID, []string{"proj/a"}, time.Now()); err != nil {
		t.Fatal(err)
	}

	// A waiting broker, and an answer forged for it that is not an answer.
	c, err := NewConsole(state)
	if err != nil {
		t.Fatal(err)
	}
	done := asking(t.Context(), c, sampleRequest())
	var waiting string
	for _, r := range awaitPending(t, q, 1) {
		if r.ID != forged.ID {
			waiting = r.ID
		}
	}
	write(answerPrefix+waiting+queueExt, `{"version": 1, "id": "`+forged.ID+`", "approvedPaths": ["proj/a"]}`)
	if r := result(t, done); r.Error == "" || len(r.Approved) != 0 {
		t.Fatalf("a malformed answer: Ask = %+v, want nothing approved and an error", r)
	}

	q.Sweep(time.Now().Add(2 * time.Minute))
	if left := queueFiles(t, q); len(left) != 0 {
		t.Errorf("after the sweep the queue still holds %q", left)
	}
}

// TestConsoleQueueMustBePrivate: a queue directory other users may use, a
// state directory they may write, or a queue that is a symbolic link is
// refused by the provider at start and at each question (nothing
// approved), and by OpenQueue (the console).
func TestConsoleQueueMustBePrivate(t *testing.T) {
	if !queueModesChecked {
		t.Skip("no Unix modes on this platform")
	}
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, state, queue string)
	}{
		{"queue open to others", func(t *testing.T, _, queue string) { chmod(t, queue, 0o777) }},
		{"queue readable by the group", func(t *testing.T, _, queue string) { chmod(t, queue, 0o750) }},
		{"state writable by others", func(t *testing.T, state, _ string) { chmod(t, state, 0o777) }},
		{"queue a symbolic link", func(t *testing.T, state, queue string) {
			elsewhere := t.TempDir()
			if err := os.Remove(queue); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, queue); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			c, err := NewConsole(state, WithTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			queue := filepath.Join(state, QueueDirName)
			if fi, err := os.Stat(queue); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("the queue made by NewConsole: %v, %v; want mode 0700", fi.Mode(), err)
			}
			tc.spoil(t, state, queue)
			d, err := c.Ask(t.Context(), sampleRequest())
			if !errors.Is(err, ErrUnsafeQueue) || len(d.Approved) != 0 {
				t.Errorf("Ask = %+v, %v; want nothing approved and ErrUnsafeQueue", d, err)
			}
			if _, err := NewConsole(state); !errors.Is(err, ErrUnsafeQueue) {
				t.Errorf("NewConsole: %v, want ErrUnsafeQueue", err)
			}
			if _, err := OpenQueue(state); !errors.Is(err, ErrUnsafeQueue) {
				t.Errorf("OpenQueue: %v, want ErrUnsafeQueue", err)
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// consoleJob is what the console helper reads on stdin.
type consoleJob struct {
	StateDir  string  `json:"stateDir"`
	TimeoutMS int     `json:"timeoutMs"`
	Request   Request `json:"request"`
}

// consoleRole asks one question through the console provider of a state
// directory, as a broker process does, and prints the result.
func consoleRole([]string) error {
	var job consoleJob
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		return fmt.Errorf("the job: %w", err)
	}
	c, err := NewConsole(job.StateDir, WithTimeout(time.Duration(job.TimeoutMS)*time.Millisecond))
	if err != nil {
		return err
	}
	d, err := c.Ask(context.Background(), job.Request)
	r := askResult{Approved: d.Approved, Provider: d.Provider}
	if err != nil {
		r.Error = err.Error()
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// TestConsoleSeveralBrokerProcesses: three broker processes (this test
// binary as a helper) ask at once through one state directory; each answer
// reaches the process whose request it answers, and only that one.
func TestConsoleSeveralBrokerProcesses(t *testing.T) {
	state := t.TempDir()
	q, err := OpenQueue(state)
	if err != nil {
		t.Fatal(err)
	}
	servers := []string{"alpha", "bravo", "charlie"}
	procs := map[string]*helperproc.Proc{}
	for _, s := range servers {
		req := sampleRequest()
		req.Server = Server{ID: s, Name: s}
		b, err := json.Marshal(consoleJob{StateDir: state, TimeoutMS: 30000, Request: req})
		if err != nil {
			t.Fatal(err)
		}
		p := helperproc.Start(t, helperproc.Command("console"))
		p.Send(string(b))
		procs[s] = p
	}
	// Each server gets the paths at the index of its name, one each: alpha
	// proj/a, bravo proj/b, charlie proj/c.
	for _, r := range awaitPending(t, q, len(servers)) {
		i := slices.Index(servers, r.Request.Server.ID)
		if i < 0 {
			t.Fatalf("a request of an unknown server: %+v", r)
		}
		if _, err := q.Answer(r.ID, r.Request.Paths[i:i+1], time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range servers {
		var r askResult
		if err := json.Unmarshal([]byte(procs[s].Line()), &r); err != nil {
			t.Fatal(err)
		}
		if want := sampleRequest().Paths[i : i+1]; r.Error != "" || !slices.Equal(r.Approved, want) {
			t.Errorf("%s got %+v, want %q", s, r, want)
		}
	}
}

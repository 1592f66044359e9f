// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package consent

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// nobody is the user the forging process runs as.
const nobody = 65534

// TestConsoleAnotherUserCannotForge: what keeps a local process of another
// user from putting a request in the queue, or an answer to a waiting one,
// is the queue's mode, 0700: a real process of another user (nobody), with
// every directory above the queue open to it, fails to create either file;
// with the queue opened to others (mode 0777) it succeeds, and the provider
// and OpenQueue then refuse the queue. Needs root, to run a process as
// another user.
func TestConsoleAnotherUserCannotForge(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	// Every directory above the queue open to the forger: t.TempDir's
	// parent is private to this user.
	base, err := os.MkdirTemp("", "fsbroker-consent-forge-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	chmod(t, base, 0o755)
	state := filepath.Join(base, "state")
	c, err := NewConsole(state, WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	chmod(t, state, 0o755) // the state directory may be listed; the queue is what is private
	q, err := OpenQueue(state)
	if err != nil {
		t.Fatal(err)
	}
	done := asking(t.Context(), c, sampleRequest())
	waiting := awaitPending(t, q, 1)[0]
	forge := func(name, content string) error {
		cmd := exec.Command("/bin/sh", "-c", `printf '%s' "$2" > "$1"`, "sh", filepath.Join(q.Dir(), name), content)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("the forger: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return err
	}
	id := newRequestID()
	now := time.Now().UTC()
	b, err := json.Marshal(QueuedRequest{Version: 1, ID: id, Created: now, Deadline: now.Add(time.Minute),
		Request: Request{Server: Server{ID: "notes"}, Paths: []string{"proj"}, Access: AccessWrite}})
	if err != nil {
		t.Fatal(err)
	}
	answer := `{"version": 1, "id": "` + waiting.ID + `", "approvedPaths": ["proj/a", "proj/b", "proj/c"]}`
	if forge(requestPrefix+id+queueExt, string(b)) == nil {
		t.Error("a process of another user wrote a request into the 0700 queue")
	}
	if forge(answerPrefix+waiting.ID+queueExt, answer) == nil {
		t.Error("a process of another user wrote an answer into the 0700 queue")
	}

	// Opened to others, the queue takes the forger's files: the broker
	// refuses such a queue (nothing approved), and so does the console.
	chmod(t, q.Dir(), 0o777)
	if err := forge(requestPrefix+id+queueExt, string(b)); err != nil {
		t.Fatalf("with the queue at 0777 the forger failed too (%v): the test shows nothing", err)
	}
	if err := forge(answerPrefix+waiting.ID+queueExt, answer); err != nil {
		t.Fatalf("with the queue at 0777 the forger failed too (%v): the test shows nothing", err)
	}
	if _, err := OpenQueue(state); err == nil {
		t.Error("OpenQueue took a queue open to others")
	}
	if r := result(t, done); len(r.Approved) != 0 {
		t.Errorf("the broker approved %q from a queue open to others", r.Approved)
	}
}

func init() { platformRoles["fifoswap"] = fifoSwapRole }

// fifoSwapJob is what the fifoswap helper reads on stdin.
type fifoSwapJob struct {
	Dir     string `json:"dir"`
	Name    string `json:"name"`
	Content []byte `json:"content"`
	MS      int    `json:"ms"`
}

// fifoSwapRole puts, for the job's time, a regular file with the job's
// content and a FIFO in turn at the queue file's name (each made aside,
// then renamed over it), as a process of the same user could, then prints
// how many swaps it made.
func fifoSwapRole([]string) error {
	var job fifoSwapJob
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		return err
	}
	target := filepath.Join(job.Dir, job.Name)
	regular, fifo := filepath.Join(job.Dir, "swap-regular"), filepath.Join(job.Dir, "swap-fifo")
	swaps := 0
	for end := time.Now().Add(time.Duration(job.MS) * time.Millisecond); time.Now().Before(end); swaps++ {
		if err := os.WriteFile(regular, job.Content, 0o600); err != nil {
			return err
		}
		if err := os.Rename(regular, target); err != nil {
			return err
		}
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			return err
		}
		if err := os.Rename(fifo, target); err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(swaps)
}

// TestConsoleQueueFileSwappedForAFIFO attacks the reading of a queue file:
// a process of the same user (this test binary, as a second process) swaps
// a valid request file and a FIFO in turn at its name, so that a reader
// that looked (Lstat: a regular file) then opens a FIFO, whose open waits
// for a writer that never comes. The console's Pending (and the broker's
// look for its answer, the same reader) must never hang: each call returns.
func TestConsoleQueueFileSwappedForAFIFO(t *testing.T) {
	state := t.TempDir()
	q, err := OpenQueue(state)
	if err != nil {
		t.Fatal(err)
	}
	id := newRequestID()
	content, err := json.Marshal(QueuedRequest{Version: queueVersion, ID: id, Created: time.Now().UTC(),
		Deadline: time.Now().Add(time.Minute).UTC(), PID: os.Getpid(), Request: sampleRequest()})
	if err != nil {
		t.Fatal(err)
	}
	job, _ := json.Marshal(fifoSwapJob{Dir: q.Dir(), Name: requestPrefix + id + queueExt, Content: content, MS: 2000})
	p := helperproc.Start(t, helperproc.Command("fifoswap"))
	p.Send(string(job))
	swapped := make(chan string, 1)
	go func() { swapped <- p.Line() }()
	calls := 0
	for {
		returned := make(chan struct{})
		go func() {
			_, _ = q.Pending(time.Now())
			_, _ = q.readAnswer(id) // the broker's reader: no answer file, so nothing to swap there
			close(returned)
		}()
		select {
		case <-returned:
			calls++
		case <-time.After(5 * time.Second):
			t.Fatalf("Pending hung (a FIFO opened as the request file?) after %d calls", calls)
		}
		select {
		case n := <-swapped:
			t.Logf("%d calls of Pending returned while the helper made %s swaps", calls, n)
			return
		default:
		}
	}
}

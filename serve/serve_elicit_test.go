// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// elicitHostInit is the initialize params of a host that shows forms, on
// version (2025-11-25 declares form mode by name, 2025-06-18 with {}).
func elicitHostInit(version string) string {
	elicitation := `{"form":{}}`
	if version == "2025-06-18" {
		elicitation = `{}`
	}
	return `{"protocolVersion":"` + version + `","capabilities":{"elicitation":` + elicitation + `},"clientInfo":{"name":"elicit-host","version":"1"}}`
}

// scriptedConsent is the person at the host, answering fsbroker's
// elicitation/create as the test scripts it: an action, and with accept
// every field set to approve; or an error.
type scriptedConsent struct {
	mu      sync.Mutex
	action  string
	approve bool
	err     *jsonrpc.Error
	asked   []json.RawMessage // the params of each question
}

// answer scripts the next answers.
func (c *scriptedConsent) answer(action string, approve bool, err *jsonrpc.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.action, c.approve, c.err = action, approve, err
}

// handler answers elicitation/create as scripted.
func (c *scriptedConsent) handler(req *mcppeer.Message) (any, *jsonrpc.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, req.Params)
	if c.err != nil {
		return nil, c.err
	}
	var params struct {
		RequestedSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"requestedSchema"`
	}
	_ = json.Unmarshal(req.Params, &params)
	content := map[string]any{}
	for field := range params.RequestedSchema.Properties {
		content[field] = c.approve
	}
	if c.action != "accept" {
		return map[string]any{"action": c.action}, nil
	}
	return map[string]any{"action": c.action, "content": content}, nil
}

// questions returns the params of the questions asked so far.
func (c *scriptedConsent) questions() []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]json.RawMessage(nil), c.asked...)
}

// elicitTree is a writable root ws with notes.txt, and a state directory.
type elicitTree struct {
	ws, state string
}

func newElicitTree(t *testing.T) elicitTree {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	et := elicitTree{ws: filepath.Join(base, "ws"), state: filepath.Join(base, "state")}
	if err := os.MkdirAll(et.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(et.ws, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return et
}

// start runs fsbroker serve on the tree for a host sending init and
// answering questions with c.
func (et elicitTree) start(t *testing.T, init string, c *scriptedConsent, stderr *testlog.Lines, flags ...string) *referenceClient {
	t.Helper()
	h := serveHost{init: init, opts: []mcppeer.Option{mcppeer.WithHandler("elicitation/create", c.handler)}}
	if stderr != nil {
		h.stderr = stderr
	}
	return startServeWith(t, et.state, h, append([]string{"--root", et.ws + ":rw"}, flags...)...)
}

// grantJSON is a grant as fsbroker grants list --json prints it.
type grantJSON struct {
	ID, Access, Path, Server, By string
	Pinned                       bool
}

// listGrants runs fsbroker grants list --json on the state directory.
func listGrants(t *testing.T, state string) []grantJSON {
	t.Helper()
	out, err := exec.Command(brokerBinary(t), "grants", "list", "--state-dir", state, "--json").Output()
	if err != nil {
		t.Fatalf("fsbroker grants list: %v", err)
	}
	var list struct{ Grants []grantJSON }
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("fsbroker grants list: %v\n%s", err, out)
	}
	return list.Grants
}

// TestServeElicitConsent: with no --consent given and a host that declares
// elicitation with form mode, a call on a path no grant covers asks the
// person through the host's UI (elicitation/create, with the mode member on
// 2025-11-25 only, naming the host UNVERIFIED, the access and the path); an
// accepted yes becomes a grant of the host's declared identity, kept in the
// grants store as fsbroker grants list shows it, and the next call is not
// asked again. With --client-id the grant is the pinned identity's.
func TestServeElicitConsent(t *testing.T) {
	for _, c := range []struct {
		version, clientID string
	}{{"2025-11-25", ""}, {"2025-06-18", ""}, {"2025-11-25", "pinned-host"}} {
		t.Run(c.version+" "+c.clientID, func(t *testing.T) {
			et := newElicitTree(t)
			person := &scriptedConsent{}
			person.answer("accept", true, nil)
			var flags []string
			if c.clientID != "" {
				flags = []string{"--client-id", c.clientID}
			}
			p := et.start(t, elicitHostInit(c.version), person, nil, flags...)
			requireRead(t, p, filepath.Join(et.ws, "notes.txt"), "notes\n")
			requireRead(t, p, "ws/notes.txt", "notes\n")
			asked := person.questions()
			if len(asked) != 1 {
				t.Fatalf("%d questions, want 1", len(asked))
			}
			var q struct {
				Mode    *string `json:"mode"`
				Message string  `json:"message"`
			}
			if err := json.Unmarshal(asked[0], &q); err != nil {
				t.Fatal(err)
			}
			if (q.Mode != nil) != (c.version == "2025-11-25") || q.Mode != nil && *q.Mode != "form" {
				t.Errorf("mode %v on %s", q.Mode, c.version)
			}
			want := []string{"elicit-host", "Access:  read", "ws/notes.txt", "UNVERIFIED"}
			if c.clientID != "" {
				want = []string{c.clientID, "identity pinned by the operator", "ws/notes.txt"}
			}
			for _, w := range want {
				if !strings.Contains(q.Message, w) {
					t.Errorf("the question does not say %q:\n%s", w, q.Message)
				}
			}
			server, pinned := "elicit-host", false
			if c.clientID != "" {
				server, pinned = c.clientID, true
			}
			gs := listGrants(t, et.state)
			if len(gs) != 1 || gs[0].Path != "ws/notes.txt" || gs[0].Access != "read" || gs[0].By != "elicit" ||
				gs[0].Server != server || gs[0].Pinned != pinned {
				t.Errorf("grants %+v, want one read grant on ws/notes.txt by elicit for %s (pinned %v)", gs, server, pinned)
			}
		})
	}
}

// TestServeElicitApprovesNothingUnlessAccepted: a decline, a cancel, an
// accept that leaves the path's field false, and an error answer approve
// nothing: the call is refused for want of consent, the content is never
// shown, and no grant is kept.
func TestServeElicitApprovesNothingUnlessAccepted(t *testing.T) {
	for name, answer := range map[string]func(*scriptedConsent){
		"decline":         func(c *scriptedConsent) { c.answer("decline", true, nil) },
		"cancel":          func(c *scriptedConsent) { c.answer("cancel", true, nil) },
		"accept, no":      func(c *scriptedConsent) { c.answer("accept", false, nil) },
		"an error answer": func(c *scriptedConsent) { c.answer("", false, &jsonrpc.Error{Code: -32603, Message: "no UI"}) },
		"unknown action":  func(c *scriptedConsent) { c.answer("approve", true, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			et := newElicitTree(t)
			person := &scriptedConsent{}
			answer(person)
			p := et.start(t, elicitHostInit("2025-11-25"), person, nil, "--consent", "elicit")
			res := p.call("read_text_file", map[string]any{"path": filepath.Join(et.ws, "notes.txt")})
			requireRefused(t, res, "PERMISSION_DENIED: no consent grant covers")
			if strings.Contains(resultText(res), "notes\n") {
				t.Fatalf("the refusal shows the content: %q", resultText(res))
			}
			res = p.call("write_file", map[string]any{"path": filepath.Join(et.ws, "new.txt"), "content": "x"})
			requireRefused(t, res, "PERMISSION_DENIED: no consent grant covers")
			if _, err := os.Lstat(filepath.Join(et.ws, "new.txt")); !os.IsNotExist(err) {
				t.Errorf("a write without consent happened (%v)", err)
			}
			if n := len(person.questions()); n != 2 {
				t.Errorf("%d questions, want one per call", n)
			}
			if gs := listGrants(t, et.state); len(gs) != 0 {
				t.Errorf("grants %+v kept, want none", gs)
			}
		})
	}
}

// TestServeElicitWithoutTheCapability: --consent elicit with a host that
// declared no elicitation asks nobody and approves nothing, and the log says
// why; so does the default provider (no --consent: without a terminal,
// deny).
func TestServeElicitWithoutTheCapability(t *testing.T) {
	for name, flags := range map[string][]string{"--consent elicit": {"--consent", "elicit"}, "default": nil} {
		t.Run(name, func(t *testing.T) {
			et := newElicitTree(t)
			person := &scriptedConsent{}
			person.answer("accept", true, nil)
			stderr := &testlog.Lines{}
			p := et.start(t, testClientInit, person, stderr, flags...)
			requireRefused(t, p.call("read_text_file", map[string]any{"path": filepath.Join(et.ws, "notes.txt")}),
				"PERMISSION_DENIED: no consent grant covers")
			if n := len(person.questions()); n != 0 {
				t.Errorf("a host without elicitation was asked %d times", n)
			}
			if name == "--consent elicit" {
				deadline := time.Now().Add(10 * time.Second)
				for stderr.Count("consent was not given", "elicitation capability") == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if stderr.Count("consent was not given", "elicitation capability") == 0 {
					t.Errorf("no log line says why nobody was asked:\n%s", stderr.String())
				}
			}
		})
	}
}

// TestServeElicitGrantRevoked: a grant given through the host's UI is taken
// back by a real fsbroker grants revoke while fsbroker serve runs: the next
// call under it is refused (and asked about again: the person now says no),
// and the grant is gone from fsbroker grants list.
func TestServeElicitGrantRevoked(t *testing.T) {
	et := newElicitTree(t)
	person := &scriptedConsent{}
	person.answer("accept", true, nil)
	p := et.start(t, elicitHostInit("2025-11-25"), person, nil)
	path := filepath.Join(et.ws, "notes.txt")
	requireRead(t, p, path, "notes\n")
	if gs := listGrants(t, et.state); len(gs) != 1 {
		t.Fatalf("grants %+v, want the one given", gs)
	}
	person.answer("decline", false, nil)

	start := time.Now()
	out, err := exec.Command(brokerBinary(t), "grants", "revoke", "--state-dir", et.state, "--server", "elicit-host",
		"--path", "ws/notes.txt").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "revoked 1 grant(s)") {
		t.Fatalf("fsbroker grants revoke: %v\n%s", err, out)
	}
	exited := time.Now()
	for {
		res := p.call("read_text_file", map[string]any{"path": path})
		if res["isError"] == true {
			requireRefused(t, res, "PERMISSION_DENIED: no consent grant covers")
			break
		}
		if time.Since(exited) > 5*time.Second {
			t.Fatal("reads under the revoked grant were still answered 5 s after fsbroker grants revoke exited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the first refused call came %v after fsbroker grants revoke started, %v after it exited (PROTOCOL.md: within 1 s)",
		time.Since(start), time.Since(exited))
	if gs := listGrants(t, et.state); len(gs) != 0 {
		t.Errorf("grants %+v after the revocation, want none", gs)
	}
}

package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
	"github.com/fsbroker/fsbroker/schema"
)

// checkedDecider passes every request to the real policy engine and holds
// every policy input the session builds to schema/policy-input.json.
type checkedDecider struct {
	PolicyDecider
	t *testing.T
	v *schema.Validator

	mu     sync.Mutex
	inputs int
}

func (d *checkedDecider) check(in *PolicyInput) {
	b, err := json.Marshal(in)
	if err != nil {
		d.t.Error(err)
		return
	}
	if err := d.v.ValidatePolicyInput(b); err != nil {
		d.t.Errorf("policy input breaks its contract: %v\n%s", err, b)
	}
	d.mu.Lock()
	d.inputs++
	d.mu.Unlock()
}

func (d *checkedDecider) Decide(ctx context.Context, req Request) error {
	d.check(req.Input)
	return d.PolicyDecider.Decide(ctx, req)
}

func (d *checkedDecider) Visible(ctx context.Context, req Request, entries []InputPath) (map[string]bool, error) {
	in := *req.Input
	in.Operation, in.Entries = "visible", entries
	d.check(&in)
	return d.PolicyDecider.Visible(ctx, req, entries)
}

// TestDefaultPoliciesOverTheWire runs requests through the real engine with
// the built-in policies: each default rule allows and denies what it should.
func TestDefaultPoliciesOverTheWire(t *testing.T) {
	e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	v, err := schema.New()
	if err != nil {
		t.Fatal(err)
	}
	d := &checkedDecider{PolicyDecider: PolicyDecider{Engine: e}, t: t, v: v}
	f := startFiles(t, WithDecider(d))
	for _, p := range []string{filepath.Join(f.rw, ".ssh"), filepath.Join(f.rw, "docs")} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	if r, _, _ := f.call("files/read", map[string]any{"path": "ro/a.txt"}); r == nil {
		t.Error("a plain read was denied")
	}
	data := f.mustFail("files/read", map[string]any{"path": "ro/.env"}, -32002, "PERMISSION_DENIED")
	if reason, _ := data["reason"].(string); !strings.Contains(reason, "secret") || data["policyRevision"] == "" {
		t.Errorf("secret read denial: %v", data)
	}
	f.mustFail("files/write", map[string]any{"path": "ro/b.txt", "content": "x"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/write", map[string]any{"path": "rw/.ssh/id_rsa", "content": "x"}, -32002, "PERMISSION_DENIED")
	if r, _, _ := f.call("files/write", map[string]any{"path": "rw/docs/notes.md", "content": "# notes"}); r == nil {
		t.Error("a write in the writable root was denied")
	}
	// The listing hides the secret even when hidden files are asked for.
	res, _, _ := f.call("files/list", map[string]any{"path": "ro", "includeHidden": true})
	for _, e := range res["entries"].([]any) {
		if name := e.(map[string]any)["name"]; name == ".env" {
			t.Error("the listing shows .env")
		}
	}
	if r, _, _ := f.call("roots/list", nil); len(r["roots"].([]any)) != 2 {
		t.Errorf("roots/list = %v", r)
	}
	if d.inputs < 8 {
		t.Errorf("only %d policy inputs were checked", d.inputs)
	}
}

// TestPolicyDeciderFailsClosed: a decision that cannot be made denies.
func TestPolicyDeciderFailsClosed(t *testing.T) {
	dir := t.TempDir()
	rego := "package fsbroker.authz\n\ndecision := {\"allow\": true, \"code\": \"\", \"reasons\": [], \"obligations\": {}} if {\n\tinput.bytes / 0 > 1\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "broken.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(context.Background(), engine.Source{Dir: dir}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	f := startFiles(t, WithDecider(PolicyDecider{Engine: e}))
	f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
}

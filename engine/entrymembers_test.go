// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/fsbroker/fsbroker/broker/decision"
)

// TestEntryMemberBits: each member's bit is its place in entryMemberNames.
func TestEntryMemberBits(t *testing.T) {
	bits := []entryMembers{memberRequested, memberCanonical, memberRoot, memberMount, memberRelative, memberMountPath,
		memberWritable, memberExists, memberType, memberSize, memberNlink, memberHidden, memberLowerSlashRelative,
		memberJoinedMountPath}
	if len(bits) != len(entryMemberNames) {
		t.Fatalf("%d bits for %d names", len(bits), len(entryMemberNames))
	}
	for i, name := range entryMemberNames {
		if bits[i] != 1<<i || !entryMembers(0).with(name).has(name) || entryMembers(0).with(name) != bits[i] {
			t.Errorf("%s: bit %b, with gives %b", name, bits[i], entryMembers(0).with(name))
		}
	}
	if entryMembers(0).with("noSuchMember") != 0 {
		t.Error("a member no entry has was added")
	}
}

// memberNamesOf lists the members in m.
func memberNamesOf(m entryMembers) []string {
	var out []string
	for _, name := range entryMemberNames {
		if m.has(name) {
			out = append(out, name)
		}
	}
	return out
}

// TestEntryMembersOfTheBuiltinSet: the built-in set's rules read six members of an entry, and its
// batches' entries are built with those.
func TestEntryMembersOfTheBuiltinSet(t *testing.T) {
	e := newTestEngine(t, defaultFiles(t), WithRunTests(false))
	want := []string{"mount", "relative", "mountPath", "writable", factLowerSlashRelative, factJoinedMountPath}
	if got := memberNamesOf(e.current().entryMembers); !slices.Equal(got, want) {
		t.Errorf("the built-in set reads %v; want %v", got, want)
	}
}

// TestReadEntryMembers: a rule that reads an entry's member by its name adds that member; any
// other way to read an entry (as a whole, by a computed name, input or input.entries as a whole,
// an entry passed to a function, compared, printed or put in a collection) makes every member
// built.
func TestReadEntryMembers(t *testing.T) {
	const head = "package fsbroker.authz\n\n"
	cases := []struct {
		name, rules string
		want        []string // nil: every member
		printing    bool     // print kept (a debug logger), as compile keeps it
	}{
		{"by name", `hide contains e.mountPath if { some e in input.entries; e.size > 100 }`, []string{"mountPath", "size"}, false},
		{"by a constant key", `hide contains e.mountPath if { some e in input.entries; e["type"] == "symlink" }`, []string{"mountPath", "type"}, false},
		{"object.get by name", `hide contains e.mountPath if { some e in input.entries; object.get(e, "hidden", false) }`, []string{"mountPath", "hidden"}, false},
		{"an indexed entry's member", `hide contains "x" if input.entries[0].nlink > 1`, []string{"nlink"}, false},
		{"a member no entry has", `hide contains e.mountPath if { some e in input.entries; count(e.ancestors) > 1 }`, []string{"mountPath"}, false},
		{"by a computed key", `hide contains e.mountPath if { some e in input.entries; some k in ["size"]; e[k] > 1 }`, nil, false},
		{"iterated", `hide contains e.mountPath if { some e in input.entries; some k, v in e; k == "size"; v > 1 }`, nil, false},
		{"object.get by a computed key", `hide contains e.mountPath if { some e in input.entries; some k in ["size"]; object.get(e, k, 0) > 1 }`, nil, false},
		{"object.get by a path", `hide contains e.mountPath if { some e in input.entries; object.get(e, ["size"], 0) > 1 }`, nil, false},
		{"passed to a function", "local_big(e) if e.size > 1\nhide contains e.mountPath if { some e in input.entries; local_big(e) }", nil, false},
		{"passed to a built-in", `hide contains e.mountPath if { some e in input.entries; count(object.keys(e)) > 1 }`, nil, false},
		{"compared whole", `hide contains e.mountPath if { some e in input.entries; e == input.path }`, nil, false},
		{"bound again", `hide contains x.mountPath if { some e in input.entries; x := e; x.size > 1 }`, nil, false},
		{"in a collection", `local_all := [e | some e in input.entries]`, nil, false},
		{"every", `local_small if every e in input.entries { e.size < 10 }`, nil, false},
		{"printed", `hide contains e.mountPath if { some e in input.entries; print(e) }`, nil, true},
		{"printing off", `hide contains e.mountPath if { some e in input.entries; print(e) }`, []string{"mountPath"}, false},
		{"an indexed entry whole", `local_first := input.entries[0]`, nil, false},
		{"entries whole", `local_many if count(input.entries) > 5`, nil, false},
		{"input whole", `local_doc := input`, nil, false},
		{"input by a computed key", `local_any contains k if { some k in ["entries"]; input[k] }`, nil, false},
		{"an entry as a key", `local_keyed if data.local[input.entries[_]]`, nil, false},
		{"under with", `local_w if { some e in input.entries; e.size > 1 with data.x as 1 }`, []string{"size"}, false},
		{"object.get replaced", "local_get(o, _, _) := o.nlink\n" +
			`local_r if { some e in input.entries; object.get(e, "size", 0) > 1 with object.get as local_get }`, nil, false},
		{"bound to two entries", `local_twin if { e = input.entries[i]; e = input.entries[j]; i != j }`, nil, false},
		{"bound in two rules", "local_a if { e = input.entries[_]; e.size > 1 }\nlocal_b if { e = input.entries[_]; e.type == \"file\" }",
			[]string{"type", "size"}, false},
	}
	for _, c := range cases {
		m, err := ast.ParseModuleWithOpts("local.rego", head+c.rules, parserOptions())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		comp, err := compile(map[string]*ast.Module{"local.rego": m}, c.printing)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := readEntryMembers(comp.Modules)
		want := allEntryMembers
		if c.want != nil {
			want = 0
			for _, name := range c.want {
				want = want.with(name)
			}
		}
		if got != want {
			t.Errorf("%s: %v; want %v", c.name, memberNamesOf(got), memberNamesOf(want))
		}
	}
}

// TestEntryMembersOfDerivedSets: a set whose batches the derived rules answer (it defines only
// decision, or its visible uses the derived one) passes each entry whole to the decision: every
// member is built.
func TestEntryMembersOfDerivedSets(t *testing.T) {
	onlyDecision := map[string]string{"authz.rego": trivialPolicy}
	usesDerived := maps.Clone(defaultFiles(t))
	usesDerived["local.rego"] = "package fsbroker.authz\n\nlocal_shown := data.fsbroker.derived.visible\n"
	for name, files := range map[string]map[string]string{"only decision": onlyDecision, "uses derived": usesDerived} {
		if got := newTestEngine(t, files, WithRunTests(false)).current().entryMembers; got != allEntryMembers {
			t.Errorf("%s: reads %v; want every member", name, memberNamesOf(got))
		}
	}
}

// TestOperatorRulesSeeTheMembersTheyRead attacks the members left out: an operator's hide rule
// beside the built-in set that reads members the built-in rules do not (size, type, nlink,
// hidden, canonical; by name, by a computed key, through a function) still hides its entries
// through the Decider, as the same batch sent as JSON (every member) does.
func TestOperatorRulesSeeTheMembersTheyRead(t *testing.T) {
	rules := map[string]string{
		"by name":           `hide contains e.mountPath if { some e in input.entries; e.size > 4096 }`,
		"by a computed key": `hide contains e.mountPath if { some e in input.entries; some k, v in e; k == "type"; v == "symlink" }`,
		"through a function": "local_linked(e) if e.nlink > 1\n" +
			`hide contains e.mountPath if { some e in input.entries; local_linked(e) }`,
		"object.get":   `hide contains e.mountPath if { some e in input.entries; object.get(e, "hidden", false) }`,
		"by canonical": `hide contains e.mountPath if { some e in input.entries; endswith(e.canonical, "/private") }`,
	}
	entries := []decision.InputPath{
		{Requested: "proj/a.go", Canonical: "/home/u/proj/a.go", Root: "/home/u/proj", Mount: "proj", Relative: "a.go",
			MountPath: "proj/a.go", Exists: true, Type: "file", Size: 10},
		{Requested: "proj/big.bin", Canonical: "/home/u/proj/big.bin", Root: "/home/u/proj", Mount: "proj", Relative: "big.bin",
			MountPath: "proj/big.bin", Exists: true, Type: "file", Size: 1 << 20},
		{Requested: "proj/link", Canonical: "/home/u/proj/link", Root: "/home/u/proj", Mount: "proj", Relative: "link",
			MountPath: "proj/link", Exists: true, Type: "symlink"},
		{Requested: "proj/hard", Canonical: "/home/u/proj/hard", Root: "/home/u/proj", Mount: "proj", Relative: "hard",
			MountPath: "proj/hard", Exists: true, Type: "file", Nlink: 2},
		{Requested: "proj/.dot", Canonical: "/home/u/proj/.dot", Root: "/home/u/proj", Mount: "proj", Relative: ".dot",
			MountPath: "proj/.dot", Exists: true, Type: "file", Hidden: true},
		{Requested: "proj/private", Canonical: "/home/u/proj/private", Root: "/home/u/proj", Mount: "proj", Relative: "private",
			MountPath: "proj/private", Exists: true, Type: "directory"},
	}
	hidden := map[string]string{"by name": "proj/big.bin", "by a computed key": "proj/link", "through a function": "proj/hard",
		"object.get": "proj/.dot", "by canonical": "proj/private"}
	ctx := context.Background()
	for name, rule := range rules {
		files := maps.Clone(defaultFiles(t))
		files["local.rego"] = "package fsbroker.authz\n\n" + rule + "\n"
		e := newTestEngine(t, files, WithRunTests(false))
		in := decision.Input{Version: 1, Method: "files/list", Operation: decision.OpVisible,
			Server: decision.InputServer{ID: "example", Name: "example"}, Session: decision.InputSession{ID: "s1"},
			Time: decision.NewInputTime(time.Now())}
		got, err := Decider{Engine: e}.Visible(ctx, &in, entries)
		if err != nil || got[hidden[name]] || len(got) != len(entries)-1 {
			t.Errorf("%s: shown %v, %v; want all but %s", name, got, err, hidden[name])
		}
		batch := in
		batch.Entries = entries
		doc, _ := encodeInput(&batch)
		if want, _ := e.Visible(ctx, json.RawMessage(doc)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v; the JSON input gives %v", name, got, want)
		}
	}
}

// TestBuiltinBatchesAgreeWithEveryMember: under settings that make each hide and withheld rule
// name an entry (a server's deny_paths, consent never and never_write, an extra secret pattern),
// the built-in set's visible and consentable of a batch built with its six members are those of
// the same batch with every member (sent as JSON), and they hide what the settings hide.
func TestBuiltinBatchesAgreeWithEveryMember(t *testing.T) {
	files := maps.Clone(defaultFiles(t))
	files["data.json"] = `{"fsbroker": {"servers": {"example": {"deny_paths": ["proj/Vendor"]}},
		"consent": {"never": ["proj/private"], "never_write": [".git"]},
		"secrets": {"extra_patterns": ["*.kdbx"], "extra_dirs": [], "allow": []}}}`
	e := newTestEngine(t, files, WithRunTests(false))
	if e.current().entryMembers == allEntryMembers {
		t.Fatal("the built-in set is built with every member")
	}
	var entries []decision.InputPath
	for i, rel := range []string{"a.go", ".env", "keys/id_rsa", "tls/server.pem", "home/.ssh/config", "vendor/lib.go",
		"private/notes.txt", "private", ".git/HEAD", "db.KDBX", "src/main.go"} {
		entries = append(entries, decision.InputPath{Requested: "proj/" + rel, Canonical: "/home/u/proj/" + rel,
			Root: "/home/u/proj", Mount: "proj", Relative: rel, MountPath: "proj/" + rel, Writable: i != 10, Exists: true, Type: "file"})
	}
	entries = append(entries, decision.InputPath{Root: "/home/u/proj", Mount: "proj", Relative: "a.go", MountPath: "proj/shown.go", Type: "file"})
	wantVisible := []string{"proj/.git/HEAD", "proj/a.go", "proj/src/main.go"}
	wantConsent := []string{"proj/a.go"} // write: not .git, and src/main.go's root entry is not writable
	ctx := context.Background()
	d := Decider{Engine: e}
	for _, op := range []string{decision.OpVisible, decision.OpConsent} {
		in := decision.Input{Version: 1, Method: "files/list", Operation: op,
			Server: decision.InputServer{ID: "example", Name: "example"}, Session: decision.InputSession{ID: "s1"},
			Time: decision.NewInputTime(time.Now())}
		var got, want map[string]bool
		var err error
		batch := in
		batch.Entries = entries
		if op == decision.OpConsent {
			in.Method, in.Params = "files/consent", json.RawMessage(`{"access":"write"}`)
			batch.Method, batch.Params = in.Method, in.Params
			got, err = d.Consentable(ctx, &in, entries)
			doc, _ := encodeInput(&batch)
			want, _ = e.Consentable(ctx, json.RawMessage(doc))
		} else {
			got, err = d.Visible(ctx, &in, entries)
			doc, _ := encodeInput(&batch)
			want, _ = e.Visible(ctx, json.RawMessage(doc))
		}
		expected := wantVisible
		if op == decision.OpConsent {
			expected = wantConsent
		}
		if err != nil || !reflect.DeepEqual(got, want) || !slices.Equal(slices.Sorted(maps.Keys(got)), expected) {
			t.Errorf("%s: %v, %v; the JSON input gives %v; want %v", op, got, err, want, expected)
		}
	}
}

// TestEntryMembersMissedReads attacks the analysis with reads it took for member reads: an
// object.get replaced by a function of the operator's (with object.get as f: f gets the entry
// whole and reads what it likes), and an entry's variable bound to two entries (e =
// input.entries[i]; e = input.entries[j] compares them whole). Through the Decider, each operator
// rule beside the built-in set decides a batch as the same batch with every member (sent as
// JSON) does, for visible and consentable.
func TestEntryMembersMissedReads(t *testing.T) {
	rules := map[string]string{
		"object.get replaced": "local_get(o, _, _) := o.nlink\n" +
			`hide contains e.mountPath if { some e in input.entries; object.get(e, "size", 0) > 1 with object.get as local_get }`,
		"object.get replaced in a rule it calls": "local_get(o, _, _) := o.nlink\n" +
			"local_linked contains e.mountPath if { some e in input.entries; object.get(e, \"size\", 0) > 1 }\n" +
			`hide contains p if { some p in local_linked with object.get as local_get }`,
		"an entry's variable bound twice": "local_twin(i) if { e = input.entries[i]; e = input.entries[j]; i != j }\n" +
			`hide contains e.mountPath if { some i; e = input.entries[i]; not local_twin(i) }`,
	}
	entry := func(rel, typ string, size int64, nlink uint64) decision.InputPath {
		return decision.InputPath{Requested: "proj/" + rel, Canonical: "/home/u/proj/" + rel, Root: "/home/u/proj", Mount: "proj",
			Relative: rel, MountPath: "proj/" + rel, Writable: true, Exists: true, Type: typ, Size: size, Nlink: nlink}
	}
	// Two events on proj/a.go, one before and one after it grew: twins in every member but size.
	entries := []decision.InputPath{entry("a.go", "file", 10, 1), entry("hard", "file", 20, 2), entry("dir", "directory", 0, 3),
		entry("a.go", "file", 99, 1)}
	ctx := context.Background()
	for name, rule := range rules {
		files := maps.Clone(defaultFiles(t))
		files["local.rego"] = "package fsbroker.authz\n\n" + rule + "\n"
		e := newTestEngine(t, files, WithRunTests(false))
		for _, op := range []string{decision.OpVisible, decision.OpConsent} {
			in := decision.Input{Version: 1, Method: "files/list", Operation: op,
				Server: decision.InputServer{ID: "example", Name: "example"}, Session: decision.InputSession{ID: "s1"},
				Time: decision.NewInputTime(time.Now())}
			decide, decideJSON := Decider{Engine: e}.Visible, e.Visible
			if op == decision.OpConsent {
				in.Method, in.Params = "files/consent", json.RawMessage(`{"access":"read"}`)
				decide, decideJSON = Decider{Engine: e}.Consentable, e.Consentable
			}
			got, err := decide(ctx, &in, entries)
			batch := in
			batch.Entries = entries
			doc, _ := encodeInput(&batch)
			want, wantErr := decideJSON(ctx, json.RawMessage(doc))
			if wantErr != nil || len(want) == len(entries) {
				t.Fatalf("%s %s: the JSON input gives %v, %v: the rule hides nothing", name, op, want, wantErr)
			}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s: shown %v, %v (members %v); the JSON input gives %v", name, op, got, err,
					memberNamesOf(e.current().entryMembers), want)
			}
		}
	}
}

// TestReloadRecomputesEntryMembers: a policy directory edited to add a hide rule on a member the
// set did not read before (size) is reloaded with that member built, and the batch decided before
// the edit (cached by the old set) is decided again by the new one: the large entry is hidden.
func TestReloadRecomputesEntryMembers(t *testing.T) {
	dir := policyDir(t, defaultFiles(t))
	ctx := context.Background()
	e, err := New(ctx, Source{Dir: dir}, WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	if e.current().entryMembers.has("size") {
		t.Fatal("the built-in set reads size")
	}
	entries := []decision.InputPath{
		{Requested: "proj/a.go", Canonical: "/home/u/proj/a.go", Root: "/home/u/proj", Mount: "proj", Relative: "a.go",
			MountPath: "proj/a.go", Exists: true, Type: "file", Size: 10},
		{Requested: "proj/big.bin", Canonical: "/home/u/proj/big.bin", Root: "/home/u/proj", Mount: "proj", Relative: "big.bin",
			MountPath: "proj/big.bin", Exists: true, Type: "file", Size: 1 << 20},
	}
	in := decision.Input{Version: 1, Method: "files/list", Operation: decision.OpVisible,
		Server: decision.InputServer{ID: "example", Name: "example"}, Session: decision.InputSession{ID: "s1"},
		Time: decision.NewInputTime(time.Now())}
	d := Decider{Engine: e}
	if got, err := d.Visible(ctx, &in, entries); err != nil || len(got) != 2 {
		t.Fatalf("before the edit: shown %v, %v; want both", got, err)
	}
	writeFiles(t, dir, map[string]string{"local.rego": "package fsbroker.authz\n\n" +
		`hide contains e.mountPath if { some e in input.entries; e.size > 4096 }` + "\n"})
	var reloadErr error
	e.Reload(ctx, func(_ string, err error) { reloadErr = err })
	if reloadErr != nil || !e.current().entryMembers.has("size") {
		t.Fatalf("after the edit: %v, members %v", reloadErr, memberNamesOf(e.current().entryMembers))
	}
	if got, err := d.Visible(ctx, &in, entries); err != nil || !reflect.DeepEqual(got, map[string]bool{"proj/a.go": true}) {
		t.Errorf("after the edit: shown %v, %v; want proj/a.go only", got, err)
	}
}

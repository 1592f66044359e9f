// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/policies"
)

// batchValueCases are batches of every shape the Decider sends: the request inputs of
// requestValueCases with entries that share their root, mount and type or not, whose requested
// is their mountPath or not, with upper case, trailing slashes, an empty relative, invalid UTF-8,
// and one with every field set by reflection.
func batchValueCases(t *testing.T) []decision.Input {
	t.Helper()
	var full decision.InputPath
	fillValue(t, reflect.ValueOf(&full).Elem(), "entry")
	entries := []decision.InputPath{
		{Requested: "m/a.txt", Canonical: "/r/a.txt", Root: "/r", Mount: "m", Relative: "a.txt", MountPath: "m/a.txt",
			Exists: true, Type: "file", Size: 5, Nlink: 0},
		{Requested: "m/Src/.ENV", Canonical: "/r/Src/.ENV", Root: "/r", Mount: "m", Relative: "Src/.ENV", MountPath: "m/Src/.ENV",
			Writable: true, Exists: true, Type: "file", Size: 1 << 40, Hidden: true},
		{Requested: "m", Canonical: "/r", Root: "/r", Mount: "m", MountPath: "m", Exists: true, Type: "directory"},
		{Requested: "asked", Canonical: "/q/d/", Root: "/q", Mount: "M", Relative: "d/", MountPath: "M/d", Type: "symlink", Nlink: 1<<64 - 1},
		{Requested: "m/caf\xc3", Canonical: "/r/caf\xc3", Root: "/r\xff", Mount: "m\xfe", Relative: "CAF\xc3\x28", MountPath: "m/x", Type: "other"},
		full,
	}
	var out []decision.Input
	for i, in := range requestValueCases(t) {
		in.Entries = entries[:1+i%len(entries)]
		out = append(out, in)
	}
	last := out[len(out)-1]
	last.Entries = entries
	return append(out, last)
}

// TestBatchValueMatchesParse: the batch input batchValue builds is the value the engine gets by
// parsing encodeInput's JSON of it (the way Decider.Visible, Consentable and Carried took
// before), facts included.
func TestBatchValueMatchesParse(t *testing.T) {
	for i, in := range batchValueCases(t) {
		got, ok := batchValue(newSessionPart(&in), &in)
		if want := parsedInput(t, &in); !ok || got.Compare(want) != 0 {
			t.Errorf("input %d (built: %v):\n got %v\nwant %v", i, ok, got, want)
		}
		if got.Get(ast.StringTerm(factEntryFacts)) == nil {
			t.Errorf("input %d: no %s", i, factEntryFacts)
		}
	}
}

// parsedInput is the value the engine gets from in encoded as JSON, facts included.
func parsedInput(t *testing.T, in *decision.Input) ast.Value {
	t.Helper()
	doc, _ := encodeInput(in)
	v, err := parsedWithFacts(doc)
	if err != nil {
		t.Fatalf("parse %s: %v", doc, err)
	}
	return v
}

// FuzzBatchValue: for any entry, the value built is the one the JSON parses to.
func FuzzBatchValue(f *testing.F) {
	f.Add("m", "a/B.txt", "m/a/B.txt", "m/a/B.txt", "/r", int64(5), uint64(1))
	f.Add("M\xff", "", "M", "x", "", int64(-1), uint64(1<<63))
	f.Add("m", "ǅ/İ/\u2028", "m/ǅ/İ/\u2028", "m", "/r/", int64(1<<62), uint64(0))
	f.Fuzz(func(t *testing.T, mount, rel, mountPath, requested, root string, size int64, nlink uint64) {
		in := decision.Input{Version: 1, Method: "files/list", Operation: "visible",
			Entries: []decision.InputPath{
				{Requested: requested, Canonical: root + "/" + rel, Root: root, Mount: mount, Relative: rel, MountPath: mountPath,
					Type: rel, Size: size, Nlink: nlink, Hidden: size > 0},
				{Requested: mountPath, Root: root, Mount: mount, Relative: mountPath, MountPath: mountPath + "/" + rel, Type: "file"},
			}}
		got, ok := batchValue(newSessionPart(&in), &in)
		if want := parsedInput(t, &in); !ok || got.Compare(want) != 0 {
			t.Fatalf("built: %v\n got %v\nwant %v", ok, got, want)
		}
	})
}

// TestBatchValueLeavesOddInputsToJSON: a batch whose params are not JSON is not built; the
// encoded document is null, which the engine refuses, so nothing is visible.
func TestBatchValueLeavesOddInputsToJSON(t *testing.T) {
	in := decision.Input{Params: json.RawMessage(`{"a":`), Entries: []decision.InputPath{{MountPath: "m/a"}}}
	if v, ok := batchValue(newSessionPart(&in), &in); ok {
		t.Fatalf("built %v", v)
	}
	e := newTestEngine(t, defaultFiles(t), WithRunTests(false))
	if vis, err := (Decider{Engine: e}).Visible(t.Context(), &in, in.Entries); err == nil || len(vis) != 0 {
		t.Errorf("Visible: %v, %v; want nothing and an error", vis, err)
	}
}

// TestBatchKeysFollowEveryField: two batches that differ in one field of one entry, or in the
// request's own part, have different cache keys; the time is not part of it.
func TestBatchKeysFollowEveryField(t *testing.T) {
	base := batchValueCases(t)[1]
	part := newSessionPart(&base)
	key := batchValueKey(visibleQuery, part, &base)
	later := base
	later.Time = decision.NewInputTime(time.Now())
	if batchValueKey(visibleQuery, part, &later) != key {
		t.Error("the time changed the key")
	}
	if batchValueKey(consentQuery, part, &base) == key {
		t.Error("the query did not change the key")
	}
	entry := reflect.ValueOf(&base.Entries[0]).Elem()
	for i := range entry.NumField() {
		changed := base
		changed.Entries = append([]decision.InputPath(nil), base.Entries...)
		f := reflect.ValueOf(&changed.Entries[0]).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Uint64:
			f.SetUint(f.Uint() + 1)
		default:
			t.Fatalf("field %s of kind %s", entry.Type().Field(i).Name, f.Kind())
		}
		if batchValueKey(visibleQuery, part, &changed) == key {
			t.Errorf("a change of %s did not change the key", entry.Type().Field(i).Name)
		}
	}
	// A string's bytes moved to the next field is another key (each field behind its length).
	moved := base
	moved.Entries = []decision.InputPath{base.Entries[0]}
	e := &moved.Entries[0]
	e.Requested, e.Canonical = e.Requested+e.Canonical[:1], e.Canonical[1:]
	one := base
	one.Entries = base.Entries[:1]
	if batchValueKey(visibleQuery, part, &moved) == batchValueKey(visibleQuery, part, &one) {
		t.Error("moving a byte from one field to the next did not change the key")
	}
	other := base
	other.Operation = "consent"
	if batchValueKey(visibleQuery, part, &other) == key {
		t.Error("the operation did not change the key")
	}
}

// TestDeciderBatchesDecideAsJSON: the Decider's batches (built as values) show, grant and carry
// exactly what the same inputs encoded as JSON do, with the built-in set.
func TestDeciderBatchesDecideAsJSON(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Source{FS: policies.FS}, WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	d := Decider{Engine: e}
	in := decision.Input{Version: 1, Method: "files/list", Operation: "list",
		Server:  decision.InputServer{ID: "example", Name: "example"},
		Session: decision.InputSession{ID: "s1"}, Grants: []decision.InputGrant{{Access: "write", Path: "proj"}},
		Time: decision.NewInputTime(time.Now())}
	var entries []decision.InputPath
	for i, rel := range []string{"a.go", ".env", "Certs/Server.PEM", "sub/.SSH/known_hosts", ".git/config", ".git/HEAD",
		"envelope.txt", "id_rsa.pub", "x/.Env.local", "ok/file" + strconv.Itoa(7)} {
		entries = append(entries, decision.InputPath{Requested: "proj/" + rel, Canonical: "/home/u/proj/" + rel, Root: "/home/u/proj",
			Mount: "proj", Relative: rel, MountPath: "proj/" + rel, Writable: i%2 == 0, Exists: true, Type: "file"})
	}
	// An entry whose mountPath disagrees with its mount and relative.
	entries = append(entries, decision.InputPath{Root: "/home/u/proj", Mount: "proj", Relative: "a.go", MountPath: "proj/b.go", Type: "file"})
	for _, op := range []string{decision.OpVisible, decision.OpConsent} {
		batch := in
		batch.Operation, batch.Entries = op, entries
		if op == decision.OpConsent {
			batch.Method, batch.Params = "files/consent", json.RawMessage(`{"access":"write"}`)
		}
		doc, _ := encodeInput(&batch)
		var want map[string]bool
		var got map[string]bool
		if op == decision.OpVisible {
			want, _ = e.Visible(ctx, json.RawMessage(doc))
			got, err = d.Visible(ctx, &batch, entries)
		} else {
			want, _ = e.Consentable(ctx, json.RawMessage(doc))
			got, err = d.Consentable(ctx, &batch, entries)
		}
		if err != nil || !reflect.DeepEqual(got, want) || len(got) == 0 || len(got) == len(entries) {
			t.Errorf("%s: %v, %v; the JSON input gives %v", op, got, err, want)
		}
	}
	carried := in
	carried.Method, carried.Operation, carried.Entries = "files/delete", decision.OpDelete, entries
	doc, _ := encodeInput(&carried)
	want, _ := e.Decide(ctx, json.RawMessage(doc))
	if got := d.Carried(ctx, &carried, entries); got.Allow || got.Allow != want.Allow || !reflect.DeepEqual(got.Reasons, want.Reasons) {
		t.Errorf("Carried: %+v; the JSON input gives %+v", got, want)
	}
}

// TestGivenEntryFactsAreReplaced: facts a caller gives with its entries (forged to make a secret
// or a disagreeing entry look harmless, or beside entries they cannot be computed for) are
// replaced or dropped by the engine, so the entry is still hidden.
func TestGivenEntryFactsAreReplaced(t *testing.T) {
	e := newTestEngine(t, defaultFiles(t), WithRunTests(false))
	ctx := context.Background()
	cases := map[string]func(entry map[string]any){
		"a secret's path given as a harmless one": func(entry map[string]any) {
			entry["relative"], entry["mountPath"], entry["requested"] = "cfg/.Env", "proj/cfg/.Env", "proj/cfg/.Env"
			entry["lowerSlashRelative"], entry["joinedMountPath"] = "/cfg/readme.txt", "proj/cfg/.Env"
		},
		"a disagreeing mountPath given as the join": func(entry map[string]any) {
			entry["mountPath"] = "proj/shown.txt"
			entry["lowerSlashRelative"], entry["joinedMountPath"] = "/a.txt", "proj/shown.txt"
		},
		"a disagreeing mountPath, the join forged on a secret": func(entry map[string]any) {
			entry["relative"] = "id_rsa"
			entry["lowerSlashRelative"], entry["joinedMountPath"] = "/a.txt", "proj/a.txt"
		},
		"facts beside a mount that is not a string": func(entry map[string]any) {
			entry["mount"] = 7
			entry["mountPath"] = "7/a.txt"
			entry["lowerSlashRelative"], entry["joinedMountPath"] = "/a.txt", "7/a.txt"
		},
	}
	for name, forge := range cases {
		in := visibleInput(t, "proj/a.txt")
		entry := in["entries"].([]any)[0].(map[string]any)
		forge(entry)
		in["entryFacts"] = true
		for _, input := range []any{in, json.RawMessage(mustJSON(t, in))} {
			if vis, _ := e.Visible(ctx, input); len(vis) != 0 {
				t.Errorf("%s (%T): shown: %v", name, input, vis)
			}
		}
	}
	// The same entry without forgery is shown, with or without a given entryFacts.
	for _, given := range []bool{false, true} {
		in := visibleInput(t, "proj/a.txt")
		if given {
			in["entryFacts"] = false
		}
		if vis, err := e.Visible(ctx, in); !vis["proj/a.txt"] {
			t.Errorf("entryFacts given %v: %v, %v", given, vis, err)
		}
	}
}

// TestEntryWithoutItsFactsShowsNothing: an input that says its entries have their facts
// (input.entryFacts) with an entry that lacks one, which the engine never makes, shows nothing:
// the secrets rule cannot match the entry, and the evaluation fails rather than show it.
func TestEntryWithoutItsFactsShowsNothing(t *testing.T) {
	e := newTestEngine(t, defaultFiles(t), WithRunTests(false))
	in := batchValueCases(t)[1]
	in.Operation = decision.OpVisible
	for _, fact := range []string{factLowerSlashRelative, factJoinedMountPath} {
		v, ok := batchValue(newSessionPart(&in), &in)
		if !ok {
			t.Fatal("not built")
		}
		entries := v.Get(ast.StringTerm("entries")).Value.(*ast.Array)
		first := entries.Elem(0)
		first.Value = without(first.Value.(ast.Object), fact)
		set := e.current()
		vis, err := evalPathSetKeyed(t.Context(), set, set.visible, visibleQuery, v, nil, false)
		if len(vis) != 0 {
			t.Errorf("without %s: shown %v (%v)", fact, vis, err)
		}
	}
}

// TestDeciderBatchesAreCached: the same batch decided again (at another time) is answered by the
// batch cache, and a batch that differs in one entry is not.
func TestDeciderBatchesAreCached(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Source{FS: policies.FS}, WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	d := Decider{Engine: e}
	in := batchValueCases(t)[2]
	in.Operation = decision.OpList
	entries := make([]decision.InputPath, 10)
	setFirstListingEntries(entries, 1)
	cached := func() int {
		c := e.current().batches
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.m)
	}
	first, _ := d.Visible(ctx, &in, entries)
	in.Time = decision.NewInputTime(time.Now().Add(time.Hour))
	again, _ := d.Visible(ctx, &in, entries)
	if cached() != 1 || !reflect.DeepEqual(first, again) || len(first) == 0 {
		t.Fatalf("%d batches cached; %v then %v", cached(), first, again)
	}
	entries[3].Relative = "x/.env"
	if _, err := d.Visible(ctx, &in, entries); err != nil || cached() != 2 {
		t.Fatalf("a changed entry: %v, %d batches cached", err, cached())
	}
}

// TestJoinedMountPathIsTheRulesJoin attacks the joinedMountPath fact where it could differ from
// the join the confinement rule makes without it, trim_suffix(concat("/", [mount, relative]),
// "/"): an entry of an empty relative under a mount that ends in a slash (which no root of the
// broker has, but a JSON input may) is joined as "proj/", not "proj", so the entry shown as
// "proj" disagrees with what was judged and stays hidden, with the facts as without them.
func TestJoinedMountPathIsTheRulesJoin(t *testing.T) {
	e := newTestEngine(t, defaultFiles(t), WithRunTests(false))
	in := visibleInput(t, "proj/a.txt")
	entry := in["entries"].([]any)[0].(map[string]any)
	entry["mount"], entry["relative"], entry["mountPath"], entry["requested"] = "proj/", "", "proj", "proj"
	for _, input := range []any{in, json.RawMessage(mustJSON(t, in))} {
		if vis, _ := e.Visible(t.Context(), input); len(vis) != 0 {
			t.Errorf("%T: shown: %v", input, vis)
		}
	}
	if lower, joined := entryFactValues("proj/", ""); lower != "/" || joined != "proj/" {
		t.Errorf("entryFactValues(proj/, \"\") = %q, %q; want \"/\", \"proj/\"", lower, joined)
	}
}

// TestEntryFactsBesideAreEntryFactValues: the facts entriesTerm carves from an entry's mountPath
// are the strings entryFactValues makes, for mountPaths that are the join or not.
func TestEntryFactsBesideAreEntryFactValues(t *testing.T) {
	for _, c := range [][3]string{
		{"proj", "a.txt", "proj/a.txt"}, {"proj", "src/Main.go", "proj/src/Main.go"}, {"proj", "d/", "proj/d/"},
		{"proj", "d/", "proj/d"}, {"proj", "", "proj"}, {"proj/", "", "proj/"}, {"proj", "a.txt", "proj/b.txt"},
		{"proj", "a.txt", "projXa.txt"}, {"pro", "a.txt", "proj/a.txt"}, {"proj", "a.txt", "other/a.txt"},
		{"proj", "a", "proj/a/a"}, {"", "a", "/a"}, {"proj", "a.txt", "proj/a.txt/"}, {"m", "ÉTÉ/x", "m/ÉTÉ/x"},
		{"m", "été/x", "m/été/x"},
	} {
		wantLower, wantJoined := entryFactValues(c[0], c[1])
		if lower, joined := entryFactsBeside(c[0], c[1], c[2]); lower != wantLower || joined != wantJoined {
			t.Errorf("entryFactsBeside(%q, %q, %q) = %q, %q; want %q, %q", c[0], c[1], c[2], lower, joined, wantLower, wantJoined)
		}
	}
}

// TestBatchKeysOfLargeBatches: a batch larger than what batchValueKey hashes at a time has the
// key of the SHA-256 of all its key bytes at once, and one byte changed in its last entry changes
// it.
func TestBatchKeysOfLargeBatches(t *testing.T) {
	base := batchValueCases(t)[1]
	entries := make([]decision.InputPath, 500)
	setFirstListingEntries(entries, 3)
	base.Entries = entries
	part := newSessionPart(&base)
	key := batchValueKey(visibleQuery, part, &base)
	// The key bytes written out in one go.
	b := []byte{0xff}
	head := base
	head.Entries = nil
	b = requestKey(b, part, &head)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for i := range entries {
		b = appendEntryKey(b, &entries[i])
	}
	if want := (batchKey{query: visibleQuery, sum: sha256.Sum256(b), n: len(b)}); key != want || len(b) < 16<<10 {
		t.Errorf("key of %d bytes: %x (%d); want %x (%d)", len(b), key.sum, key.n, want.sum, want.n)
	}
	changed := base
	changed.Entries = append([]decision.InputPath(nil), entries...)
	changed.Entries[len(entries)-1].MountPath += "x"
	if batchValueKey(visibleQuery, part, &changed) == key {
		t.Error("a change in the last entry did not change the key")
	}
}

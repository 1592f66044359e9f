// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
)

// newValidator returns a Validator built from the real embedded schemas.
func newValidator(t testing.TB) *Validator {
	t.Helper()
	v, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

// pointers returns the pointers of err, which must be nil or an *Error.
func pointers(t testing.TB, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("error is %T (%v), want *Error", err, err)
	}
	if len(se.Errors) == 0 {
		t.Fatalf("*Error without violations")
	}
	var ps []string
	for _, fe := range se.Errors {
		ps = append(ps, fe.Pointer)
	}
	return slices.Compact(ps)
}

// checkSame returns ValidateParams's answer and checks that it is stable: the
// same params always give the same result.
func checkSame(t testing.TB, v *Validator, method string, params []byte) error {
	t.Helper()
	got := v.ValidateParams(method, params)
	again := v.ValidateParams(method, params)
	if (got == nil) != (again == nil) || got != nil && got.Error() != again.Error() {
		t.Fatalf("%s %.200q: ValidateParams is not stable: %.200v then %.200v", method, params, got, again)
	}
	return got
}

var allMethods = []string{
	"files/consent", "files/create", "files/delete", "files/list", "files/read",
	"files/rename", "files/unwatch", "files/watch", "files/write", "ping", "roots/list",
}

func TestNew(t *testing.T) {
	v := newValidator(t)
	got := v.Methods()
	if !slices.Equal(got, allMethods) {
		t.Fatalf("Methods() = %q, want %q", got, allMethods)
	}
	got[0] = "changed"
	if v.Methods()[0] != allMethods[0] {
		t.Fatal("Methods() returns the Validator's own slice")
	}
	if v.config == nil {
		t.Fatal("config schema not compiled")
	}
}

func TestNoSchema(t *testing.T) {
	v := newValidator(t)
	for _, m := range []string{"", "fs.read", "files/readx", "initialize", "config", strings.Repeat("m", 1000)} {
		err := v.ValidateParams(m, json.RawMessage(`{}`))
		if !errors.Is(err, ErrNoSchema) {
			t.Errorf("ValidateParams(%.20q) = %v, want ErrNoSchema", m, err)
		}
		var se *Error
		if errors.As(err, &se) {
			t.Errorf("ValidateParams(%.20q) returned an *Error for an unknown method", m)
		}
		if len(err.Error()) > 200 {
			t.Errorf("error for an unknown method echoes it: %d bytes", len(err.Error()))
		}
	}
}

// TestCompilerHasNoLoader checks that a $ref outside the added resources is never fetched.
func TestCompilerHasNoLoader(t *testing.T) {
	for _, ref := range []string{"file:///etc/passwd", "https://example.com/x.json", "other.json", "/etc/hostname"} {
		c := newCompiler()
		doc := map[string]any{"$schema": draft2020, "$ref": ref}
		if err := c.AddResource(idPrefix+"test.json", doc); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compile(idPrefix + "test.json"); err == nil {
			t.Errorf("$ref %q compiled: the compiler has a loader", ref)
		}
	}
}

// TestEmbeddedFiles walks every embedded schema: valid JSON, Draft 2020-12, the right $id,
// closed objects, and a description on every property.
func TestEmbeddedFiles(t *testing.T) {
	var names []string
	err := fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if path.Ext(p) != ".json" {
			t.Errorf("non-JSON file %s embedded", p)
			return nil
		}
		names = append(names, p)
		data, err := fs.ReadFile(Files(), p)
		if err != nil {
			return err
		}
		if !json.Valid(data) {
			t.Errorf("%s: not valid JSON", p)
			return nil
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema = %v", p, doc["$schema"])
		}
		if doc["$id"] != "https://fsbroker.dev/schema/"+p {
			t.Errorf("%s: $id = %v", p, doc["$id"])
		}
		if s, _ := doc["description"].(string); s == "" {
			t.Errorf("%s: no description", p)
		}
		if p != "config.json" && p != PolicyInputFile && p != AuditRecordFile {
			props, _ := doc["properties"].(map[string]any)
			if _, ok := props["_meta"]; !ok {
				t.Errorf("%s: no _meta property", p)
			}
			if !strings.Contains(doc["description"].(string), "_meta") {
				t.Errorf("%s: description does not mention _meta", p)
			}
		}
		walkSchema(t, p, "", doc)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", PolicyInputFile, AuditRecordFile}
	for _, m := range allMethods {
		want = append(want, m+".json")
	}
	slices.Sort(want)
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("embedded files = %q, want %q", names, want)
	}
}

// walkSchema checks one schema node and everything beneath it.
func walkSchema(t *testing.T, file, at string, node map[string]any) {
	t.Helper()
	isObject := node["type"] == "object" || node["properties"] != nil
	isMeta := strings.HasSuffix(at, "/properties/_meta")
	switch {
	case isMeta:
		// MCP lets any request carry params._meta with keys of its own: it stays open.
		if node["type"] != "object" || node["additionalProperties"] != nil || node["properties"] != nil {
			t.Errorf("%s#%s: _meta must be exactly an open object", file, at)
		}
	case file == PolicyInputFile && at == "/properties/params":
		// The request's params as sent: their shapes are the method schemas'.
	case file == PolicyInputFile && at == "/properties/grantsByPath":
		// Keyed by granted path: every value is an array of $defs/grant, which is walked there.
		if items := node["additionalProperties"].(map[string]any)["items"]; items.(map[string]any)["$ref"] != "#/$defs/grant" {
			t.Errorf("%s#%s: values are not arrays of grants", file, at)
		}
	case file == "config.json" && strings.HasPrefix(at, "/properties/opa/properties/"):
		// OPA's own configuration members, checked by OPA's parser when the broker starts.
	case isObject:
		if node["additionalProperties"] != false {
			t.Errorf("%s#%s: object without additionalProperties: false", file, at)
		}
	}
	if props, ok := node["properties"].(map[string]any); ok {
		for name, sub := range props {
			subNode, ok := sub.(map[string]any)
			if !ok {
				t.Errorf("%s#%s/properties/%s: not an object", file, at, name)
				continue
			}
			if s, _ := subNode["description"].(string); s == "" {
				t.Errorf("%s#%s/properties/%s: no description", file, at, name)
			}
			walkSchema(t, file, at+"/properties/"+name, subNode)
		}
	}
	if items, ok := node["items"].(map[string]any); ok {
		walkSchema(t, file, at+"/items", items)
	}
	if defs, ok := node["$defs"].(map[string]any); ok {
		for name, sub := range defs {
			walkSchema(t, file, at+"/$defs/"+name, sub.(map[string]any))
		}
	}
	if not, ok := node["not"].(map[string]any); ok {
		// Only "not one of these values" is used (a mount is never "." or "..").
		if len(not) != 1 || not["enum"] == nil {
			t.Errorf("%s#%s: not must hold only an enum", file, at)
		}
	}
	forbidden := []string{"allOf", "anyOf", "oneOf", "patternProperties"}
	if file == AuditRecordFile {
		// Its per-kind rules (allOf of if/then) and alternatives (anyOf)
		// constrain members declared above; audit's own tests hold every
		// record kind to them.
		forbidden = forbidden[2:]
	}
	for _, k := range forbidden {
		if _, ok := node[k]; ok {
			t.Errorf("%s#%s: %s is not walked by this test", file, at, k)
		}
	}
}

// methodSpec describes one method's params for the generated cases.
type methodSpec struct {
	method    string
	minimal   string   // smallest valid params
	maximal   string   // every optional param set
	required  []string // each must be reported when left out of minimal
	wrongType string   // a document with one property of the wrong type
	wrongAt   string   // the pointer it must report
}

var methodSpecs = []methodSpec{
	{"ping", `{}`, `{"_meta":{"progressToken":1}}`, nil, `{"_meta":"x"}`, "/_meta"},
	{"roots/list", `{}`, `{"_meta":{"progressToken":"t"}}`, nil, `{"_meta":[]}`, "/_meta"},
	{
		"files/consent",
		`{"message":"let me","requestedPaths":["proj"]}`,
		`{"message":"let me","requestedPaths":["proj/a","/home/u/proj/b","file:///home/u/proj/c"],"access":"write","_meta":{}}`,
		[]string{"message", "requestedPaths"},
		`{"message":"m","requestedPaths":[1]}`, "/requestedPaths/0",
	},
	{
		"files/read",
		`{"path":"proj/a.txt"}`,
		`{"path":"proj/a.txt","encoding":"base64","offset":10,"length":4096,"_meta":{"progressToken":7}}`,
		[]string{"path"},
		`{"path":"proj/a.txt","offset":"10"}`, "/offset",
	},
	{
		"files/write",
		`{"path":"proj/a.txt","content":""}`,
		`{"path":"proj/a.txt","content":"aGk=","encoding":"base64","create":false,"createParents":true,"ifMatch":"e1","ifNoneMatch":"*","offset":0,"final":false,"_meta":{}}`,
		[]string{"path", "content"},
		`{"path":"proj/a.txt","content":"x","create":"yes"}`, "/create",
	},
	{
		"files/list",
		`{"path":"proj"}`,
		`{"path":"proj","recursive":true,"includeHidden":true,"maxDepth":3,"limit":500,"cursor":"c2","_meta":{}}`,
		[]string{"path"},
		`{"path":"proj","limit":"many"}`, "/limit",
	},
	{
		"files/create",
		`{"path":"proj/d","type":"directory"}`,
		`{"path":"proj/d/f","type":"file","parents":true,"_meta":{}}`,
		[]string{"path", "type"},
		`{"path":"proj/d","type":"directory","parents":1}`, "/parents",
	},
	{
		"files/delete",
		`{"path":"proj/f"}`,
		`{"path":"proj/d","recursive":true,"_meta":{}}`,
		[]string{"path"},
		`{"path":["proj/f"]}`, "/path",
	},
	{
		"files/rename",
		`{"oldPath":"proj/a","newPath":"proj/b"}`,
		`{"oldPath":"proj/a","newPath":"proj/b","overwrite":true,"_meta":{}}`,
		[]string{"oldPath", "newPath"},
		`{"oldPath":"proj/a","newPath":null}`, "/newPath",
	},
	{
		"files/watch",
		`{"path":"proj"}`,
		`{"path":"proj","recursive":true,"events":["created","modified","deleted"],"_meta":{}}`,
		[]string{"path"},
		`{"path":"proj","events":"created"}`, "/events",
	},
	{
		"files/unwatch",
		`{"watchId":"w1"}`,
		`{"watchId":"w1","_meta":{}}`,
		[]string{"watchId"},
		`{"watchId":1}`, "/watchId",
	},
}

// withProp returns the object doc with one more member.
func withProp(doc, member string) string {
	if doc == `{}` {
		return `{` + member + `}`
	}
	return strings.TrimSuffix(doc, `}`) + `,` + member + `}`
}

// withoutProp returns the object doc without the named member.
func withoutProp(t *testing.T, doc, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, name)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type paramsCase struct {
	name   string
	method string
	params string
	want   []string // pointers; nil means valid
}

// generatedCases builds the cases every method must pass.
func generatedCases(t *testing.T) []paramsCase {
	var cases []paramsCase
	for _, s := range methodSpecs {
		add := func(name, params string, want ...string) {
			cases = append(cases, paramsCase{name: s.method + "/" + name, method: s.method, params: params, want: want})
		}
		add("minimal", s.minimal)
		add("maximal", s.maximal)
		add("meta", withProp(s.minimal, `"_meta":{"progressToken":"abc","x/y":[1,{"z":null}]}`))
		add("unknown", withProp(s.minimal, `"bogus":1`), "/bogus")
		add("unknown-escaped", withProp(s.minimal, `"a/b~c":1`), "/a~1b~0c")
		add("wrong-type", s.wrongType, s.wrongAt)
		add("meta-not-object", withProp(s.minimal, `"_meta":5`), "/_meta")
		for _, r := range s.required {
			add("missing-"+r, withoutProp(t, s.minimal, r), "/"+r)
		}
		add("array", `[]`, "")
		add("array-of-params", `[`+s.minimal+`]`, "")
		add("string", `"x"`, "")
		add("number", `5`, "")
		add("true", `true`, "")
		if len(s.required) == 0 {
			add("absent", ``)
			add("null", `null`)
			add("spaced-null", " \n null \t")
		} else {
			want := make([]string, len(s.required))
			for i, r := range s.required {
				want[i] = "/" + r
			}
			slices.Sort(want)
			add("absent", ``, want...)
			add("null", `null`, want...)
		}
	}
	return cases
}

// boundCases are the specific limits of the contract.
var boundCases = []paramsCase{
	{name: "limit 0", method: "files/list", params: `{"path":"p","limit":0}`, want: []string{"/limit"}},
	{name: "limit 10001", method: "files/list", params: `{"path":"p","limit":10001}`, want: []string{"/limit"}},
	{name: "limit 1", method: "files/list", params: `{"path":"p","limit":1}`},
	{name: "limit 10000", method: "files/list", params: `{"path":"p","limit":10000}`},
	{name: "limit 1.0", method: "files/list", params: `{"path":"p","limit":1.0}`},
	{name: "limit 1e2", method: "files/list", params: `{"path":"p","limit":1e2}`},
	{name: "limit 1.5", method: "files/list", params: `{"path":"p","limit":1.5}`, want: []string{"/limit"}},
	{name: "limit huge", method: "files/list", params: `{"path":"p","limit":123456789012345678901234567890}`, want: []string{"/limit"}},
	{name: "maxDepth 0", method: "files/list", params: `{"path":"p","maxDepth":0}`},
	{name: "maxDepth -1", method: "files/list", params: `{"path":"p","maxDepth":-1}`, want: []string{"/maxDepth"}},
	{name: "offset -1", method: "files/read", params: `{"path":"p","offset":-1}`, want: []string{"/offset"}},
	{name: "offset -0", method: "files/read", params: `{"path":"p","offset":-0}`},
	{name: "offset huge", method: "files/read", params: `{"path":"p","offset":123456789012345678901234567890}`},
	{name: "offset huge negative", method: "files/read", params: `{"path":"p","offset":-123456789012345678901234567890}`, want: []string{"/offset"}},
	{name: "length -5", method: "files/read", params: `{"path":"p","length":-5}`, want: []string{"/length"}},
	{name: "length 0", method: "files/read", params: `{"path":"p","length":0}`},
	{name: "write offset -1", method: "files/write", params: `{"path":"p","content":"","offset":-1}`, want: []string{"/offset"}},
	{name: "message 2000", method: "files/consent", params: `{"message":"` + strings.Repeat("m", 2000) + `","requestedPaths":["p"]}`},
	{name: "message 2001", method: "files/consent", params: `{"message":"` + strings.Repeat("m", 2001) + `","requestedPaths":["p"]}`, want: []string{"/message"}},
	{name: "message 2000 runes", method: "files/consent", params: `{"message":"` + strings.Repeat("é", 2000) + `","requestedPaths":["p"]}`},
	{name: "message 2001 runes", method: "files/consent", params: `{"message":"` + strings.Repeat("é", 2001) + `","requestedPaths":["p"]}`, want: []string{"/message"}},
	{name: "message escaped", method: "files/consent", params: `{"message":"a\nb\u00e9","requestedPaths":["p"]}`},
	{name: "requestedPaths empty", method: "files/consent", params: `{"message":"m","requestedPaths":[]}`, want: []string{"/requestedPaths"}},
	{name: "requestedPaths 100", method: "files/consent", params: `{"message":"m","requestedPaths":[` + strings.TrimSuffix(strings.Repeat(`"p",`, 100), ",") + `]}`},
	{name: "requestedPaths 101", method: "files/consent", params: `{"message":"m","requestedPaths":[` + strings.TrimSuffix(strings.Repeat(`"p",`, 101), ",") + `]}`, want: []string{"/requestedPaths"}},
	{name: "requestedPaths not array", method: "files/consent", params: `{"message":"m","requestedPaths":"p"}`, want: []string{"/requestedPaths"}},
	{name: "access read", method: "files/consent", params: `{"message":"m","requestedPaths":["p"],"access":"read"}`},
	{name: "access admin", method: "files/consent", params: `{"message":"m","requestedPaths":["p"],"access":"admin"}`, want: []string{"/access"}},
	{name: "events duplicate", method: "files/watch", params: `{"path":"p","events":["created","created"]}`, want: []string{"/events"}},
	{name: "events escaped duplicate", method: "files/watch", params: `{"path":"p","events":["created","cr\u0065ated"]}`, want: []string{"/events"}},
	{name: "events empty", method: "files/watch", params: `{"path":"p","events":[]}`, want: []string{"/events"}},
	{name: "events unknown", method: "files/watch", params: `{"path":"p","events":["created","renamed"]}`, want: []string{"/events/1"}},
	{name: "events one", method: "files/watch", params: `{"path":"p","events":["deleted"]}`},
	{name: "encoding latin1", method: "files/read", params: `{"path":"p","encoding":"latin1"}`, want: []string{"/encoding"}},
	{name: "encoding escaped", method: "files/read", params: `{"path":"p","encoding":"utf\u002d8"}`},
	{name: "encoding utf-8", method: "files/write", params: `{"path":"p","content":"x","encoding":"utf-8"}`},
	{name: "encoding UTF-8", method: "files/write", params: `{"path":"p","content":"x","encoding":"UTF-8"}`, want: []string{"/encoding"}},
	{name: "ifNoneMatch x", method: "files/write", params: `{"path":"p","content":"x","ifNoneMatch":"x"}`, want: []string{"/ifNoneMatch"}},
	{name: "ifNoneMatch star", method: "files/write", params: `{"path":"p","content":"x","ifNoneMatch":"*"}`},
	{name: "ifMatch number", method: "files/write", params: `{"path":"p","content":"x","ifMatch":5}`, want: []string{"/ifMatch"}},
	{name: "type link", method: "files/create", params: `{"path":"p","type":"symlink"}`, want: []string{"/type"}},
	{name: "empty path", method: "files/read", params: `{"path":""}`},
	{name: "malformed path", method: "files/read", params: `{"path":"../../etc/passwd\\x\u0000"}`},
	{name: "invalid UTF-8 path", method: "files/read", params: "{\"path\":\"a\xff\xfeb\"}"},
	{name: "empty oldPath", method: "files/rename", params: `{"oldPath":"","newPath":""}`},
	{name: "escaped key", method: "files/read", params: `{"p\u0061th":"x"}`},
	{name: "escaped unknown key", method: "files/read", params: `{"path":"x","p\u0061":1}`, want: []string{"/pa"}},
	{name: "duplicate key last wins", method: "files/read", params: `{"path":1,"path":"x"}`},
	{name: "duplicate key last bad", method: "files/read", params: `{"path":"x","path":1}`, want: []string{"/path"}},
	{name: "several errors sorted", method: "files/read", params: `{"zz":1,"path":2,"offset":-1,"aa":true}`, want: []string{"/aa", "/offset", "/path", "/zz"}},
	{name: "whitespace", method: "files/read", params: " \r\n\t{ \"path\" : \"x\" , \"offset\" : 1 } \n"},
	{name: "deep meta", method: "ping", params: `{"_meta":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100) + `}`},
	{name: "not JSON", method: "files/read", params: `{"path":`, want: []string{""}},
	{name: "trailing comma", method: "files/read", params: `{"path":"x",}`, want: []string{""}},
	{name: "trailing data", method: "files/read", params: `{"path":"x"} {}`, want: []string{""}},
	{name: "trailing garbage", method: "ping", params: `{}x`, want: []string{""}},
	{name: "single quotes", method: "files/read", params: `{'path':'x'}`, want: []string{""}},
	{name: "control character", method: "files/read", params: "{\"path\":\"a\tb\"}", want: []string{""}},
	{name: "bad escape", method: "files/read", params: `{"path":"a\qb"}`, want: []string{""}},
	{name: "leading zero", method: "files/read", params: `{"path":"a","offset":01}`, want: []string{""}},
	{name: "bare minus", method: "files/read", params: `{"path":"a","offset":-}`, want: []string{""}},
	{name: "NaN", method: "files/read", params: `{"path":"a","offset":NaN}`, want: []string{""}},
	{name: "BOM", method: "ping", params: "\ufeff{}", want: []string{""}},
	{name: "binary", method: "ping", params: "\xff\x00", want: []string{""}},
}

func TestValidateParams(t *testing.T) {
	v := newValidator(t)
	cases := append(generatedCases(t), boundCases...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSame(t, v, tc.method, []byte(tc.params))
			got := pointers(t, err)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("pointers = %q, want %q (error: %v)", got, tc.want, err)
			}
			if err == nil {
				return
			}
			var se *Error
			errors.As(err, &se)
			for _, fe := range se.Errors {
				if fe.Message == "" {
					t.Errorf("empty message at %q", fe.Pointer)
				}
			}
			if !strings.HasPrefix(err.Error(), "invalid params: ") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestMessages(t *testing.T) {
	v := newValidator(t)
	cases := []struct {
		method, params string
		want           []FieldError
	}{
		{"files/read", `{"offset":1}`, []FieldError{{"/path", "required property is missing"}}},
		{"files/read", `{"path":"x","x/y":1,"z":2}`, []FieldError{{"/x~1y", "unknown property"}, {"/z", "unknown property"}}},
		{"files/read", `{"path":5}`, []FieldError{{"/path", "got number, want string"}}},
		{"files/write", `[]`, []FieldError{{"", "got array, want object"}}},
		{"files/read", `{"path":`, []FieldError{{"", "params are not valid JSON (unexpected end of input)"}}},
		{"files/read", `{"path":"x"}}`, []FieldError{{"", "params are not valid JSON (data after the top-level value)"}}},
		{"files/read", `{"path";"x"}`, []FieldError{{"", "params are not valid JSON (syntax error at byte offset 8)"}}},
		{"files/read", `{"path":"x","encoding":"latin1"}`, []FieldError{{"/encoding", "value must be one of 'utf-8', 'base64'"}}},
		{"files/write", `{"path":"x","content":"","ifNoneMatch":"x"}`, []FieldError{{"/ifNoneMatch", "value must be '*'"}}},
	}
	for _, tc := range cases {
		err := v.ValidateParams(tc.method, json.RawMessage(tc.params))
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("%s %s: error %v, want *Error", tc.method, tc.params, err)
			continue
		}
		if !slices.Equal(se.Errors, tc.want) {
			t.Errorf("%s %s: errors = %q, want %q", tc.method, tc.params, se.Errors, tc.want)
		}
	}
}

func TestErrorString(t *testing.T) {
	cases := []struct {
		err  *Error
		want string
	}{
		{&Error{}, "invalid params: schema violation"},
		{&Error{Errors: []FieldError{{"", "got array, want object"}}}, "invalid params: got array, want object"},
		{
			&Error{Errors: []FieldError{{"/path", "got number, want string"}, {"/x", "unknown property"}}},
			"invalid params: /path: got number, want string; /x: unknown property",
		},
		{&Error{Errors: []FieldError{{"/log/level", "m"}}, subject: subjectConfig}, "invalid config: /log/level: m"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	b, err := json.Marshal(FieldError{Pointer: "/a", Message: "m"})
	if err != nil || string(b) != `{"pointer":"/a","message":"m"}` {
		t.Errorf("FieldError JSON = %s, %v", b, err)
	}
}

// TestNoEcho checks that long values never come back in error messages.
func TestNoEcho(t *testing.T) {
	v := newValidator(t)
	secret := strings.Repeat("S3CR3T", 10240/6)
	digits := strings.Repeat("7", 10240)
	cases := []struct{ method, params string }{
		{"files/write", `{"path":"p","content":` + digits + `}`},
		{"files/write", `{"path":"p","content":-` + digits + `.5e3}`},
		{"files/write", `{"path":"p","content":{"data":"` + secret + `","n":` + digits + `}}`},
		{"files/write", `{"path":"p","content":["` + secret + `"]}`},
		{"files/write", `{"path":"p","content":"x","encoding":"` + secret + `"}`},
		{"files/write", `{"path":"p","content":"x","ifNoneMatch":"` + secret + `"}`},
		{"files/write", `{"path":"p","content":"x","` + secret + `":1}`},
		{"files/write", `{"path":"p","content":"x","offset":-` + digits + `}`},
		{"files/list", `{"path":"p","limit":` + digits + `}`},
		{"files/consent", `{"message":"` + secret + `","requestedPaths":["p"]}`},
		{"files/write", `{"path":"p","content":"` + secret + `",}`},
		{"files/write", `{"path":"p","content":"` + secret + `"`},
		{"files/write", `{"path":"p","content":"` + secret + `"} "` + secret + `"`},
	}
	for i, tc := range cases {
		err := v.ValidateParams(tc.method, json.RawMessage(tc.params))
		if err == nil {
			t.Errorf("case %d: no error", i)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, secret[:65]) || strings.Contains(msg, digits[:65]) {
			t.Errorf("case %d: error echoes the value: %.200s", i, msg)
		}
		if len(msg) > 300 {
			t.Errorf("case %d: error is %d bytes: %.200s", i, len(msg), msg)
		}
	}
	cerr := v.ValidateConfig(json.RawMessage(`{"roots":[{"path":"/p","mount":"a/` + secret + `"}]}`))
	if cerr == nil || strings.Contains(cerr.Error(), secret[:65]) {
		t.Errorf("config error echoes a long mount: %.200v", cerr)
	}
}

func TestValidateConfig(t *testing.T) {
	v := newValidator(t)
	full := `{
		"version": 1,
		"roots": [
			{"path": "/home/u/project", "mount": "project", "name": "Project", "writable": true},
			{"path": "/srv/data", "mount": ".data"},
			{"path": "/srv/x", "mount": "..."},
			{"path": "relative/dir"}
		],
		"log": {"level": "debug", "format": "json"},
		"limits": {"maxMessageBytes": 33554432, "maxInFlight": 8, "initTimeout": "30s", "shutdownTimeout": "1m30s"}
	}`
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"full", full, nil},
		{"empty object", `{}`, nil},
		{"absent", ``, nil},
		{"null", `null`, nil},
		{"durations", `{"limits":{"initTimeout":"250ms","shutdownTimeout":"1h2m3.5s"}}`, nil},
		{"micro sign", `{"limits":{"initTimeout":"10µs","shutdownTimeout":"10μs"}}`, nil},
		{"other units", `{"limits":{"initTimeout":"5ns","shutdownTimeout":"7us"}}`, nil},
		{"levels", `{"log":{"level":"trace","format":"text"}}`, nil},
		{"unknown top-level key", `{"rootz":[]}`, []string{"/rootz"}},
		{"unknown key in root", `{"roots":[{"path":"/p","readonly":true}]}`, []string{"/roots/0/readonly"}},
		{"unknown key in log", `{"log":{"file":"x"}}`, []string{"/log/file"}},
		{"unknown key in limits", `{"limits":{"maxWatchez":3}}`, []string{"/limits/maxWatchez"}},
		{"root without path", `{"roots":[{"mount":"m"}]}`, []string{"/roots/0/path"}},
		{"root empty path", `{"roots":[{"path":""}]}`, []string{"/roots/0/path"}},
		{"mount a/b", `{"roots":[{"path":"/p"},{"path":"/q","mount":"a/b"}]}`, []string{"/roots/1/mount"}},
		{"mount backslash", `{"roots":[{"path":"/p","mount":"a\\b"}]}`, []string{"/roots/0/mount"}},
		{"mount ..", `{"roots":[{"path":"/p","mount":".."}]}`, []string{"/roots/0/mount"}},
		{"mount .", `{"roots":[{"path":"/p","mount":"."}]}`, []string{"/roots/0/mount"}},
		{"mount empty", `{"roots":[{"path":"/p","mount":""}]}`, []string{"/roots/0/mount"}},
		{"mount NUL", `{"roots":[{"path":"/p","mount":"a\u0000"}]}`, []string{"/roots/0/mount"}},
		{"mount 256", `{"roots":[{"path":"/p","mount":"` + strings.Repeat("m", 256) + `"}]}`, []string{"/roots/0/mount"}},
		{"mount 255", `{"roots":[{"path":"/p","mount":"` + strings.Repeat("m", 255) + `"}]}`, nil},
		{"name empty", `{"roots":[{"path":"/p","name":""}]}`, []string{"/roots/0/name"}},
		{"writable string", `{"roots":[{"path":"/p","writable":"yes"}]}`, []string{"/roots/0/writable"}},
		{"roots object", `{"roots":{"path":"/p"}}`, []string{"/roots"}},
		{"level verbose", `{"log":{"level":"verbose"}}`, []string{"/log/level"}},
		{"format xml", `{"log":{"format":"xml"}}`, []string{"/log/format"}},
		{"maxInFlight 0", `{"limits":{"maxInFlight":0}}`, []string{"/limits/maxInFlight"}},
		{"maxInFlight 4097", `{"limits":{"maxInFlight":4097}}`, []string{"/limits/maxInFlight"}},
		{"maxInFlight 4096", `{"limits":{"maxInFlight":4096}}`, nil},
		{"maxMessageBytes 1023", `{"limits":{"maxMessageBytes":1023}}`, []string{"/limits/maxMessageBytes"}},
		{"initTimeout 5 seconds", `{"limits":{"initTimeout":"5 seconds"}}`, []string{"/limits/initTimeout"}},
		{"initTimeout number", `{"limits":{"initTimeout":30}}`, []string{"/limits/initTimeout"}},
		{"initTimeout negative", `{"limits":{"initTimeout":"-5s"}}`, []string{"/limits/initTimeout"}},
		{"shutdownTimeout bare", `{"limits":{"shutdownTimeout":"10"}}`, []string{"/limits/shutdownTimeout"}},
		{"version 2", `{"version":2}`, []string{"/version"}},
		{"stateDir empty", `{"stateDir":""}`, []string{"/stateDir"}},
		{"operationTimeout bad", `{"limits":{"operationTimeout":"soon"}}`, []string{"/limits/operationTimeout"}},
		{"maxReadBytes 0", `{"limits":{"maxReadBytes":0}}`, []string{"/limits/maxReadBytes"}},
		{"mount with colon", `{"roots":[{"path":"/p","mount":"c:"}]}`, []string{"/roots/0/mount"}},
		{"not an object", `[]`, []string{""}},
		{"not JSON", `{roots:[]}`, []string{""}},
		{"several", `{"version":2,"log":{"level":"x"},"bogus":1}`, []string{"/bogus", "/log/level", "/version"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := v.ValidateConfig(json.RawMessage(tc.doc))
			got := pointers(t, err)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("pointers = %q, want %q (error: %v)", got, tc.want, err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "invalid config: ") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
	err := v.ValidateConfig(json.RawMessage(`{`))
	if err == nil || !strings.Contains(err.Error(), "config is not valid JSON") {
		t.Errorf("invalid config JSON: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	v := newValidator(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				s := methodSpecs[(g+i)%len(methodSpecs)]
				if err := v.ValidateParams(s.method, json.RawMessage(s.maximal)); err != nil {
					t.Errorf("%s: %v", s.method, err)
					return
				}
				if err := v.ValidateParams(s.method, json.RawMessage(s.wrongType)); err == nil {
					t.Errorf("%s: wrong type accepted", s.method)
					return
				}
				if err := v.ValidateConfig(json.RawMessage(`{"log":{"level":"x"}}`)); err == nil {
					t.Error("bad config accepted")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func FuzzValidateParams(f *testing.F) {
	for _, s := range methodSpecs {
		f.Add(s.method, []byte(s.maximal))
	}
	v := newValidator(f)
	methods := v.Methods()
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		if _, ok := v.params[method]; !ok {
			if err := v.ValidateParams(method, params); !errors.Is(err, ErrNoSchema) {
				t.Fatalf("unknown method %q: %v", method, err)
			}
			method = methods[len(method)%len(methods)]
		}
		err := checkSame(t, v, method, params)
		if err == nil {
			return
		}
		var se *Error
		if !errors.As(err, &se) {
			t.Fatalf("error %T %v, want *Error", err, err)
		}
		if len(se.Errors) == 0 {
			t.Fatal("*Error without violations")
		}
		for _, fe := range se.Errors {
			if fe.Pointer != "" && !strings.HasPrefix(fe.Pointer, "/") {
				t.Fatalf("pointer %q", fe.Pointer)
			}
			if fe.Message == "" || len(fe.Message) > maxMessage+len("…") {
				t.Fatalf("message %q", fe.Message)
			}
		}
		if !slices.IsSortedFunc(se.Errors, func(a, b FieldError) int {
			if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
				return c
			}
			return strings.Compare(a.Message, b.Message)
		}) {
			t.Fatalf("errors not sorted: %q", se.Errors)
		}
	})
}

func BenchmarkValidateRead(b *testing.B) {
	v := newValidator(b)
	params := json.RawMessage(`{"path":"project/src/main.go","encoding":"utf-8","offset":0,"length":1048576}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := v.ValidateParams("files/read", params); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateWrite4KiB(b *testing.B) {
	v := newValidator(b)
	content := strings.Repeat("package main\n\nfunc main() {\n\tprintln(\"hello, world\")\n}\n", 4096/52+1)[:4096]
	quoted, err := json.Marshal(content)
	if err != nil {
		b.Fatal(err)
	}
	params := json.RawMessage(`{"path":"project/src/main.go","content":` + string(quoted) + `,"encoding":"utf-8","ifMatch":"e1f2"}`)
	b.SetBytes(int64(len(params)))
	b.ReportAllocs()
	for b.Loop() {
		if err := v.ValidateParams("files/write", params); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateInvalid measures a rejected request, which always takes the full path.
func BenchmarkValidateInvalid(b *testing.B) {
	v := newValidator(b)
	params := json.RawMessage(`{"path":5,"offset":-1,"bogus":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := v.ValidateParams("files/read", params); err == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkValidateWriteBase64 measures base64 content, which has no escapes, at two sizes.
func BenchmarkValidateWriteBase64(b *testing.B) {
	v := newValidator(b)
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			content := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIz", size/40+1)[:size]
			params := json.RawMessage(`{"path":"project/data.bin","content":"` + content + `","encoding":"base64","offset":0,"final":true}`)
			b.SetBytes(int64(len(params)))
			b.ReportAllocs()
			for b.Loop() {
				if err := v.ValidateParams("files/write", params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestValidatePolicyInput(t *testing.T) {
	v := newValidator(t)
	path := `{"requested":"p/a","canonical":"/r/a","root":"/r","mount":"p","relative":"a","mountPath":"p/a",` +
		`"writable":false,"exists":true,"type":"file","size":3,"nlink":1,"hidden":false}`
	good := `{"version":1,"method":"files/read","operation":"read",` +
		`"server":{"id":"s","name":"s","version":"1","pinned":false},` +
		`"session":{"id":"x","protocolVersion":"2025-11-25","transport":"stdio"},` +
		`"path":` + path + `,"params":{"path":"p/a"},"bytes":3,"grants":[],` +
		`"usage":{"bytesWrittenToday":0,"watches":0},"time":{"rfc3339":"2026-01-01T00:00:00Z","unixNano":1}}`
	if err := v.ValidatePolicyInput(json.RawMessage(good)); err != nil {
		t.Fatalf("a valid input: %v", err)
	}
	bad := strings.Replace(good, `"mount":"p"`, `"mount":"p","canonicl":"x"`, 1)
	if got := pointers(t, v.ValidatePolicyInput(json.RawMessage(bad))); !slices.Equal(got, []string{"/path/canonicl"}) {
		t.Errorf("a typo in the input: pointers %q", got)
	}
}

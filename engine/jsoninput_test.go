// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// opaJSONObject is what parseJSONObject must agree with: OPA's own decoding of a JSON document
// (util.UnmarshalJSON, numbers kept exact, then ast.InterfaceToValue), which must be an object.
func opaJSONObject(data []byte) (ast.Value, error) {
	var x any
	if err := util.UnmarshalJSON(data, &x); err != nil {
		return nil, err
	}
	v, err := ast.InterfaceToValue(x)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(ast.Object); !ok {
		return nil, fmt.Errorf("input is %s, want an object", ast.ValueName(v))
	}
	return v, nil
}

// jsonSeeds are documents of every shape the parser handles, valid and not.
var jsonSeeds = []string{
	`{}`, ` {} `, "{\n\t\"a\" : 1 \r}", `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":[1,2,{"c":null}]},"d":true,"e":false}`,
	`{"n":[0,-0,1,-1,12,1.5,-1.5e10,1E+2,1e-2,123456789012345678901234567890,0.000001,1e400]}`,
	`{"s":["", "plain", "caf\u00e9", "é", "\ud83d\ude00", "\ud800", "\udc00x", "a\"b", "a\\b", "\/", "\b\f\n\r\t", "\u0000"]}`,
	"{\"bad utf8\": \"a\xffb\"}", "{\"\xff\": 1}", "{\"cut\": \"\xe2\x82\"}",
	`{"a":[]}`, `{"a":[[]]}`, `{"a":{}}`, `{"":""}`,
	// Invalid.
	``, ` `, `[]`, `1`, `"s"`, `null`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`,
	`{"a":[1,]}`, `{"a":[1 2]}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`,
	`{"a":+1}`, `{"a":tru}`, `{"a":nul}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{"a":"abc`,
	`{"a":"abc\`, `{} {}`, `{}]`, `{}x`, `{"a":1}}`, `{a:1}`, `{'a':1}`, `{"a":NaN}`, `{"a":Infinity}`,
	"\xef\xbb\xbf{}", `{"a":1}` + "\x00",
}

func TestParseJSONObjectAgreesWithOPA(t *testing.T) {
	big := `{"entries":[` + strings.Repeat(`{"k":"v","n":1},`, 999) + `{"k":"v","n":1}]}`
	many := &strings.Builder{}
	many.WriteString("{")
	for i := range 200 {
		fmt.Fprintf(many, `"k%d":%d,`, i%150, i) // 50 keys given twice, past linearKeys
	}
	many.WriteString(`"last":0}`)
	deep := strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1)
	for _, doc := range append(jsonSeeds, big, many.String(), deep) {
		checkJSONAgreement(t, []byte(doc))
	}
}

// checkJSONAgreement fails when parseJSONObject and OPA's decoding disagree on doc: both must
// fail, or both give the same value.
func checkJSONAgreement(t *testing.T, doc []byte) {
	t.Helper()
	want, wantErr := opaJSONObject(doc)
	got, err := parseJSONObject(doc)
	switch {
	case (err != nil) != (wantErr != nil):
		t.Errorf("%.80q: parseJSONObject error %v, OPA's %v", doc, err, wantErr)
	case err == nil && got.Compare(want) != 0:
		t.Errorf("%.80q: parseJSONObject = %v, OPA's = %v", doc, got, want)
	case err == nil && got.(ast.Object).Len() != want.(ast.Object).Len():
		t.Errorf("%.80q: %d keys, OPA's %d", doc, got.(ast.Object).Len(), want.(ast.Object).Len())
	}
}

func FuzzParseJSONObject(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	in, err := json.Marshal(testInput(f, "read", "proj/src/a b/ü.go", true, grant("read", "proj")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(in)
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkJSONAgreement(t, doc)
	})
}

// TestInputJSONDecidesAsMap: the broker's JSON input decides as the same document as a map.
func TestInputJSONDecidesAsMap(t *testing.T) {
	e, err := New(t.Context(), Source{Dir: policyDir(t, defaultFiles(t))})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []map[string]any{
		testInput(t, "read", "proj/src/main.go", false, grant("read", "proj")),
		testInput(t, "read", "proj/.env", false, grant("read", "proj")),
		testInput(t, "write", "proj/a.txt", false, grant("write", "proj")),
		testInput(t, "write", "proj/a.txt", true, grant("read", "proj")),
	} {
		doc, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err1 := e.Decide(t.Context(), in)
		got, err2 := e.Decide(t.Context(), json.RawMessage(append(doc, '\n')))
		if err1 != nil || err2 != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n JSON %+v, %v\n map  %+v, %v", doc, got, err2, want, err1)
		}
	}
	vis := visibleInput(t, "proj/a.go", "proj/.env", "proj/key.pem", "proj/sub/b.go")
	doc, _ := json.Marshal(vis)
	want, err1 := e.Visible(t.Context(), vis)
	got, err2 := e.Visible(t.Context(), bytes.Clone(doc))
	if err1 != nil || err2 != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("visible: JSON %v, %v; map %v, %v", got, err2, want, err1)
	}
}

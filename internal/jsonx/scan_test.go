// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// member is a member as encoding/json decodes it: its name unescaped, its
// value compacted.
type member struct{ name, value string }

// scanned returns the members ObjectScanner finds in doc, decoded as
// members are, and whether the object ended with its brace followed by
// nothing but white space. It checks each Member's spans against the text.
func scanned(t *testing.T, doc []byte) (ms []member, ok bool) {
	t.Helper()
	s := ScanObject(doc)
	for s.Next() {
		m := s.Member()
		if !bytes.Equal(m.Name, doc[m.Start:m.Start+len(m.Name)]) || !bytes.Equal(m.Value, doc[m.ValueStart:m.End]) {
			t.Fatalf("%q: member %+v: its spans do not match the text", doc, m)
		}
		name, ok := Unquote(m.Name)
		if !ok {
			return nil, false
		}
		var value bytes.Buffer
		if err := json.Compact(&value, m.Value); err != nil {
			return nil, false
		}
		ms = append(ms, member{name, value.String()})
	}
	end, ok := s.End()
	return ms, ok && SkipSpace(doc, end) == len(doc)
}

// decoded returns the members encoding/json reads in doc, in order; ok is
// false when doc is not one JSON object.
func decoded(doc []byte) (ms []member, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, value); err != nil {
			return nil, false
		}
		ms = append(ms, member{tok.(string), compact.String()})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return ms, true
}

// objectCases are objects where a scan could go wrong, and texts that are
// not objects.
var objectCases = []string{
	`{"a":1,"time":{"rfc3339":"x","unixNano":1}}`, ` { "time" : 5 , "b" : [1, {"time": 2}] } `,
	`{"b":{"time":1},"c":"\"time\":3"}`, `{"\u0074ime":1}`, `{}`, "{\n}", `{"time":"a\"}"}`, `{"time":1,"time":2}`,
	`{ "path" : "a" , "content" : "q\"uo}te\\" , "offset" : 3 }`, `{"a":"\\"}`, `{"a":"\\\""}`, `{"a":"x\\\\"}`,
	`{"path":"a","nested":{"content":"kept","arr":[1,{"x":"]}"}]}}`, `{"f":-1.5e3,"t":true,"n":null}`,
	"{\"\xff\":1,\"\xfe\":2}", `{"é":"ü","<":">"}`,
	`[]`, `"str"`, `5`, ``, `{`, `{"a":1`, `{"a":1}x`, `{"a":}`, `{"a" 1}`, `{"a":[1,2}`, `{"a":"x`,
	`{"a":1,}`, `{,}`, `{"a":1 "b":2}`, `{a:1}`, `{"a":1}}`,
}

// TestObjectScannerMatchesDecoding: on every case that is valid JSON, the
// scan finds the members encoding/json reads, and an object only where
// encoding/json reads one; on the others, the scan with its values
// compacted (scanned) never yields an object.
func TestObjectScannerMatchesDecoding(t *testing.T) {
	for _, doc := range objectCases {
		got, gotOK := scanned(t, []byte(doc))
		want, wantOK := decoded([]byte(doc))
		if json.Valid([]byte(doc)) && (gotOK != wantOK || !reflect.DeepEqual(got, want)) {
			t.Errorf("%q: scanned %v, %t; decoded %v, %t", doc, got, gotOK, want, wantOK)
		}
		if !json.Valid([]byte(doc)) && gotOK {
			t.Errorf("%q: not JSON, scanned as an object %v", doc, got)
		}
	}
}

// TestObjectScannerSpans: a member's spans, and the end of the object,
// which is not checked for what follows it.
func TestObjectScannerSpans(t *testing.T) {
	doc := []byte(` { "a" : [1, "]"] ,"b":"x"} tail`)
	s := ScanObject(doc)
	var got []Member
	for s.Next() {
		got = append(got, s.Member())
	}
	want := []Member{
		{Name: []byte(`"a"`), Value: []byte(`[1, "]"]`), Start: 3, ValueStart: 9, End: 17},
		{Name: []byte(`"b"`), Value: []byte(`"x"`), Start: 19, ValueStart: 23, End: 26},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("members %+v, want %+v", got, want)
	}
	if end, ok := s.End(); !ok || end != 27 {
		t.Errorf("End() = %d, %t; want 27, true", end, ok)
	}
	if s.Next() {
		t.Error("Next after the end found a member")
	}
	bad := ScanObject([]byte(`{"a":1 "b":2}`))
	if !bad.Next() || bad.Next() {
		t.Fatal(`{"a":1 "b":2}: want one member, then a stop`)
	}
	if _, ok := bad.End(); ok {
		t.Error(`{"a":1 "b":2}: End() ok`)
	}
}

// FuzzObjectScanner compares the scan with encoding/json on any valid JSON,
// and checks on any bytes that it stops without a panic, with spans that
// match the text.
func FuzzObjectScanner(f *testing.F) {
	for _, doc := range objectCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, gotOK := scanned(t, doc)
		if !json.Valid(doc) {
			return
		}
		if want, wantOK := decoded(doc); gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: scanned %v, %t; decoded %v, %t", doc, got, gotOK, want, wantOK)
		}
	})
}

// quotedCases are JSON strings, valid and not, as a scan finds them.
var quotedCases = []string{
	`""`, `"plain"`, `"esc\"aped"`, `"\u0074ime"`, `"\ud800"`, "\"bad \xff\"", "\"ctl \x01\"", `"a"b"`,
	`"trail\"`, `"`, `x`, `"é"`, `"\n"`, `"\x"`, `"" `, ` ""`,
}

// TestUnquoteMatchesEncodingJSON: Unquote and UnquoteBytes decode a
// quoted string as json.Unmarshal does, and refuse what it refuses.
func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	for _, q := range quotedCases {
		checkUnquote(t, []byte(q))
	}
}

// FuzzUnquote compares Unquote and UnquoteBytes with json.Unmarshal on any
// bytes between quotes.
func FuzzUnquote(f *testing.F) {
	for _, q := range quotedCases {
		f.Add([]byte(q))
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		checkUnquote(t, q)
	})
}

func checkUnquote(t *testing.T, q []byte) {
	t.Helper()
	got, ok := Unquote(q)
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		if ok {
			t.Fatalf("Unquote(%q) = %q for text that is not between quotes", q, got)
		}
		return
	}
	var want string
	err := json.Unmarshal(q, &want)
	if ok != (err == nil) || got != want {
		t.Fatalf("Unquote(%q) = %q, %t; json.Unmarshal: %q, %v", q, got, ok, want, err)
	}
	if b, bok := UnquoteBytes(q); bok != ok || string(b) != got {
		t.Fatalf("UnquoteBytes(%q) = %q, %t; Unquote: %q, %t", q, b, bok, got, ok)
	}
}

// TestUnquoteBytesOfAPlainNameAllocatesNothing: a plain member name is
// compared without a copy, as the decoders of every request compare theirs.
func TestUnquoteBytesOfAPlainNameAllocatesNothing(t *testing.T) {
	name := []byte(`"method"`)
	if n := testing.AllocsPerRun(100, func() {
		if b, ok := UnquoteBytes(name); !ok || string(b) != "method" {
			t.Fatalf("UnquoteBytes(%s) = %q, %t", name, b, ok)
		}
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

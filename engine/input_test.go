// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/decision"
)

// TestInputEncodingMatchesMarshal: the hand-written encoding of a
// policy input (encodeInput) is byte for byte json.Marshal's, for an empty input, typical
// ones, and one with every field set by reflection (so that a field added to
// the input but not to the encoder fails here).
func TestInputEncodingMatchesMarshal(t *testing.T) {
	path := decision.InputPath{Requested: "m/a <b>.txt", Canonical: "/r/a <b>.txt", Root: "/r", Mount: "m", Relative: "a <b>.txt",
		MountPath: "m/a <b>.txt", Writable: true, Exists: true, Type: "file", Size: 1 << 40, Nlink: 2, Hidden: false}
	var full decision.Input
	fillValue(t, reflect.ValueOf(&full).Elem(), "input")
	cases := []decision.Input{
		{},
		{Version: 1, Method: "files/read", Operation: "read", Server: decision.InputServer{ID: "declared:x\u2028", Name: "x\"y"},
			Path: &path, Params: json.RawMessage(`{ "path": "m/<a>&b\u2028", "length": 5.0, "nested": {"k": [true, null]}}`),
			Grants: []decision.InputGrant{}, Time: decision.NewInputTime(time.Date(2026, 11, 22, 9, 0, 0, 123, time.UTC))},
		{Version: 1, Operation: "visible", Entries: []decision.InputPath{path, path}, Grants: []decision.InputGrant{{Access: "read", Path: "/r"}},
			Params: json.RawMessage(`{}`), NewPath: &path, Usage: decision.InputUsage{BytesWrittenToday: -1, Watches: 3}},
		full,
	}
	for i, in := range cases {
		want, err := json.Marshal(&in)
		if err != nil {
			t.Fatal(err)
		}
		got, key := encodeInput(&in)
		if !bytes.HasPrefix(got, key) {
			t.Errorf("input %d: key %q is not the beginning of %q", i, key, got)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("input %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// fillValue sets every field of v, recursively, to a value that is not zero.
func fillValue(t *testing.T, v reflect.Value, name string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillValue(t, v.Field(i), name+"."+v.Type().Field(i).Name)
		}
	case reflect.String:
		v.SetString("<" + name + ">")
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(len(name)))
	case reflect.Uint64:
		v.SetUint(uint64(len(name)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillValue(t, p.Elem(), name)
		v.Set(p)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"` + name + `": [1.5, "<b>"]}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for j := range 2 {
			fillValue(t, s.Index(j), name+"[]")
		}
		v.Set(s)
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string]any{name: "v", "b": 1.5}))
	default:
		t.Fatalf("%s: fillValue does not know %s", name, v.Kind())
	}
}

// TestCacheKeyIsTheInputWithoutTime: the decision cache's key leaves out the
// time, and only the time, even when params hold a member named time.
func TestCacheKeyIsTheInputWithoutTime(t *testing.T) {
	in := &decision.Input{Version: 1, Method: "files/read", Operation: decision.OpRead,
		Params: json.RawMessage(`{"nested":{"a":1,"time":{"x":1}}}`),
		Time:   decision.NewInputTime(time.Unix(1, 0))}
	doc1, k1 := encodeInput(in)
	in.Time = decision.NewInputTime(time.Unix(2, 0))
	_, k2 := encodeInput(in)
	if len(k1) == 0 || !bytes.Equal(k1, k2) {
		t.Fatalf("keys %q and %q, want equal and not empty", k1, k2)
	}
	var rest map[string]any
	if err := json.Unmarshal([]byte("{"+string(doc1[len(k1)+1:])), &rest); err != nil || len(rest) != 1 || rest["time"] == nil {
		t.Errorf("what the key leaves out: %s (%v)", doc1[len(k1):], err)
	}
	in.Usage.BytesWrittenToday = 1
	if _, k3 := encodeInput(in); bytes.Equal(k3, k1) {
		t.Error("a change of usage left the key as it was")
	}
}

package broker

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestPolicyInputEncodingMatchesMarshal: the hand-written encoding of a
// policy input is byte for byte json.Marshal's, for an empty input, typical
// ones, and one with every field set by reflection (so that a field added to
// the input but not to the encoder fails here).
func TestPolicyInputEncodingMatchesMarshal(t *testing.T) {
	path := InputPath{Requested: "m/a <b>.txt", Canonical: "/r/a <b>.txt", Root: "/r", Mount: "m", Relative: "a <b>.txt",
		MountPath: "m/a <b>.txt", Writable: true, Exists: true, Type: "file", Size: 1 << 40, Nlink: 2, Hidden: false}
	var full PolicyInput
	fillValue(t, reflect.ValueOf(&full).Elem(), "input")
	cases := []PolicyInput{
		{},
		{Version: 1, Method: "files/read", Operation: "read", Server: InputServer{ID: "declared:x\u2028", Name: "x\"y"},
			Path: &path, Params: json.RawMessage(`{ "path": "m/<a>&b\u2028", "length": 5.0, "nested": {"k": [true, null]}}`),
			Grants: []InputGrant{}, Time: NewInputTime(time.Date(2026, 11, 22, 9, 0, 0, 123, time.UTC))},
		{Version: 1, Operation: "visible", Entries: []InputPath{path, path}, Grants: []InputGrant{{Access: "read", Path: "/r"}},
			Params: json.RawMessage(`{}`), NewPath: &path, Usage: InputUsage{BytesWrittenToday: -1, Watches: 3}},
		full,
	}
	for i, in := range cases {
		want, err := json.Marshal(&in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := in.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
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

// TestIsHidden: a path is hidden when any of its segments starts with a dot,
// and only then (a dot inside or at the end of a segment does not count).
func TestIsHidden(t *testing.T) {
	for rel, want := range map[string]bool{
		"": false, "a": false, "a.b": false, "a./b": false, "a/b.": false, "a/b/c.txt": false,
		".a": true, ".": true, "a/.b": true, "a/b/.c/d": true, ".git/config": true,
	} {
		if got := isHidden(rel); got != want {
			t.Errorf("isHidden(%q) = %v, want %v", rel, got, want)
		}
	}
}

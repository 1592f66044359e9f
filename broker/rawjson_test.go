package broker

import (
	"encoding/json"
	"reflect"
	"testing"
)

// paramsCases are params with content where a scan could go wrong.
var paramsCases = []string{
	`{"path":"a.txt","content":"hello"}`,
	`{"content":"x","path":"a"}`,
	`{ "path" : "a" , "content" : "q\"uo}te\\" , "offset" : 3 }`,
	`{"cont\u0065nt":"escaped key","path":"a"}`,
	`{"content":"one","content":"two","path":"a"}`,
	`{"path":"a","nested":{"content":"kept: not top level","arr":[1,{"x":"]}"}]}}`,
	`{"content":{"not":"a string"},"flag":true,"n":null,"f":-1.5e3}`,
	`{}`, `{"content":"only"}`, `[]`, `"str"`, `{"path":"a",}`, `{"path":"a"`, ``, `{"a":"\\"}`,
}

// TestParamsWithoutContentMatchesDecoding: skipping the content by scanning
// gives the policy the same params as decoding them whole and deleting it.
func TestParamsWithoutContentMatchesDecoding(t *testing.T) {
	for _, raw := range paramsCases {
		if !json.Valid([]byte(raw)) {
			continue // never reaches the policy input: the message was refused
		}
		if got, want := paramsWithoutContent(json.RawMessage(raw)), decodedWithoutContent(raw); !reflect.DeepEqual(decodedWithoutContent(string(got)), want) {
			t.Errorf("params %s: got %s, want %v", raw, got, want)
		}
	}
}

// FuzzParamsWithoutContent compares the scan with decoding on any valid
// JSON (params reach the policy input only from a decoded message).
func FuzzParamsWithoutContent(f *testing.F) {
	for _, raw := range paramsCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		got := paramsWithoutContent(raw)
		if got != nil && (!json.Valid(got) || len(got) <= 2) {
			t.Fatalf("params %q: got %q, want nil or a JSON object with members", raw, got)
		}
		if want := decodedWithoutContent(string(raw)); !reflect.DeepEqual(decodedWithoutContent(string(got)), want) {
			t.Fatalf("params %q: got %s, want %v", raw, got, want)
		}
	})
}

// decodedWithoutContent is what the policy's params are by definition:
// the params decoded whole, without their content member ({} for nil or
// anything but an object, as the policy sees no params member then).
func decodedWithoutContent(raw string) map[string]any {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal([]byte(raw), &m) != nil || m == nil {
		return map[string]any{}
	}
	delete(m, "content")
	return m
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name, want, got string
		diffs           []string // substrings, one per expected difference; none means a match
	}{
		{"subset object", `{"a":1}`, `{"a":1,"b":2}`, nil},
		{"number by value", `{"a":1}`, `{"a":1.0}`, nil},
		{"big integers exactly", `{"a":9007199254740993}`, `{"a":9007199254740992}`, []string{"/a: got 9007199254740992"}},
		{"missing key", `{"a":1}`, `{"b":1}`, []string{`/: "a" is missing`}},
		{"nested pointer", `{"error":{"data":{"code":"X"}}}`, `{"error":{"data":{"code":"Y"}}}`, []string{`/error/data/code: got "Y", want "X"`}},
		{"pointer escapes", `{"a/b":{"c~d":1}}`, `{"a/b":{"c~d":2}}`, []string{"/a~1b/c~0d: got 2"}},
		{"array length", `[1,2]`, `[1]`, []string{"got 1 elements"}},
		{"array elements", `[{"a":1},{"a":2}]`, `[{"a":1,"x":0},{"a":3}]`, []string{"/1/a: got 3"}},
		{"absent ok", `{"e":{"$absent":true}}`, `{"r":1}`, nil},
		{"absent fails", `{"e":{"$absent":true}}`, `{"e":null}`, []string{`"e" is present`}},
		{"any needs presence", `{"e":{"$any":true}}`, `{}`, []string{`"e" is missing`}},
		{"regex", `{"s":{"$regex":"^[0-9a-f]{24}$"}}`, `{"s":"0123456789abcdef01234567"}`, nil},
		{"regex fails on non-string", `{"s":{"$regex":"1"}}`, `{"s":1}`, []string{"want a string matching"}},
		{"type integer is a number", `{"n":{"$type":"number"}}`, `{"n":3}`, nil},
		{"type", `{"n":{"$type":"string"}}`, `{"n":3}`, []string{"(integer), want a string"}},
		{"exact refuses extra keys", `{"$exact":{}}`, `{"a":1}`, []string{"want exactly {}"}},
		{"exact", `{"$exact":{"a":[1,{"b":2}]}}`, `{"a":[1,{"b":2.0}]}`, nil},
		{"not", `{"etag":{"$not":"abc"}}`, `{"etag":"abc"}`, []string{"want it not to"}},
		{"contains", `{"$contains":[{"name":"b"}]}`, `[{"name":"a"},{"name":"b"}]`, nil},
		{"contains fails", `{"$contains":[{"name":"c"}]}`, `[{"name":"a"}]`, []string{"no element matches"}},
		{"not contains", `{"$not":{"$contains":[{"name":{"$regex":"^\\.fsbroker-tmp"}}]}}`, `[{"name":"a"}]`, nil},
		{"len", `{"$len":2}`, `[1,2]`, nil},
		{"len of string", `{"$len":3}`, `"abcd"`, []string{"got length 4"}},
		{"comparisons", `{"a":{"$gte":2},"b":{"$lt":2}}`, `{"a":2,"b":3}`, []string{"/b: got 3, want lt 2"}},
		{"anyOf", `{"$anyOf":["a",{"$type":"null"}]}`, `null`, nil},
		{"anyOf absent on a missing key", `{"e":{"$anyOf":[{"$absent":true},1]}}`, `{}`, nil},
		{"not of a value on a missing key", `{"e":{"$not":1}}`, `{}`, nil},
		{"not absent needs presence", `{"e":{"$not":{"$absent":true}}}`, `{}`, []string{`"e" is missing`}},
		{"unknown operator", `{"$nope":1}`, `1`, []string{"unknown operator"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			diffs := Match(mustDecode(t, tc.want), mustDecode(t, tc.got), "")
			if len(diffs) != len(tc.diffs) {
				t.Fatalf("diffs = %q, want %d like %q", diffs, len(tc.diffs), tc.diffs)
			}
			for i, d := range tc.diffs {
				if !strings.Contains(diffs[i], d) {
					t.Errorf("diff %d = %q, want it to contain %q", i, diffs[i], d)
				}
			}
		})
	}
}

func TestExpand(t *testing.T) {
	v := newVars()
	v.fixed["area"] = "/tmp/x"
	v.captured["r1"] = mustDecode(t, `{"result":{"etag":"e1","size":12,"entries":[{"path":"p/a"}]}}`)
	tests := []struct {
		in   string
		want any
	}{
		{"plain", "plain"},
		{"file://${area}/p", "file:///tmp/x/p"},
		{"${r1.result.etag}", "e1"},
		{"${r1.result.size}", json.Number("12")},
		{"n=${r1.result.size}", "n=12"},
		{"${r1.result.entries.0.path}", "p/a"},
		{"${fill:40}", fill(40)},
		{"${repeat:3:ab}", "ababab"},
		{"${b64:hi}", "aGk="},
		{"literal $${area}", "literal ${area}"},
	}
	for _, tc := range tests {
		got, err := v.expand(tc.in)
		if err != nil {
			t.Errorf("expand(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("expand(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
	if len(fill(40)) != 40 || !strings.HasPrefix(fill(40), fillPattern) {
		t.Errorf("fill(40) = %q", fill(40))
	}
	for _, bad := range []string{"${nope.x}", "${r1.result.missing}", "${fill:x}", "${area", "${r1.result.entries.5}"} {
		if _, err := v.expand(bad); err == nil {
			t.Errorf("expand(%q): no error", bad)
		}
	}
}

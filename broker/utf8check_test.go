// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

func TestCheckText(t *testing.T) {
	for name, tc := range map[string]struct {
		params string
		code   errcode.Code
	}{
		"plain":                    {`{"path":"proj/a.txt"}`, ""},
		"escapes":                  {`{"path":"proj/a\"b\\c\u00e9"}`, ""},
		"a surrogate pair":         {`{"path":"proj/\ud83d\ude00"}`, ""},
		"an escaped backslash, u":  {`{"path":"proj/a\\udc80"}`, ""},
		"a raw bad byte in a path": {"{\"path\":\"proj/a\xffb\"}", errcode.InvalidPath},
		"a lone low surrogate":     {`{"path":"proj/a\udc80b"}`, errcode.InvalidPath},
		"a lone high surrogate":    {`{"newPath":"proj/\ud83d"}`, errcode.InvalidPath},
		"a high then not a low":    {`{"oldPath":"proj/\ud83d\u0041"}`, errcode.InvalidPath},
		"a bad path in a list":     {`{"message":"m","requestedPaths":["ok","\udfff"]}`, errcode.InvalidPath},
		"bad content":              {"{\"path\":\"proj/a\",\"content\":\"\xc3\"}", errcode.InvalidParams},
		"a surrogate in a message": {`{"message":"\ud800","requestedPaths":["a"]}`, errcode.InvalidParams},
		"a truncated escape":       {`{"path":"\ud8"}`, ""}, // the JSON decoder refuses it
	} {
		t.Run(name, func(t *testing.T) {
			err := checkText([]byte(tc.params))
			if got := errcode.Of(err); got != tc.code {
				t.Errorf("checkText(%q) = %v, want code %q", tc.params, err, tc.code)
			}
		})
	}
}

// TestInvalidUTF8PathOverTheWire: a path with a byte that is not UTF-8 never names the file
// whose name has U+FFFD in its place.
func TestInvalidUTF8PathOverTheWire(t *testing.T) {
	f := startFiles(t)
	if err := os.WriteFile(filepath.Join(f.ro, "a\uFFFDb"), []byte("not this one"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.SendRaw("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"files/read\",\"params\":{\"path\":\"ro/a\xffb\"}}")
	_, code, _ := errorOf(t, f.reply("1"))
	if code != "INVALID_PATH" {
		t.Errorf("code %q, want INVALID_PATH", code)
	}
}

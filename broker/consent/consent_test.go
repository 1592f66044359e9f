// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func sampleRequest() Request {
	return Request{
		Server:  Server{ID: "notes", Name: "notes", Version: "1.2.0"},
		Message: "I need your notes.",
		Paths:   []string{"proj/a", "proj/b", "proj/c"},
		Access:  AccessRead,
		Roots:   []Root{{Mount: "proj", Name: "Project", Path: "/home/ann/proj"}},
	}
}

func TestAutoAndDeny(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		spec     string
		req      Request
		approved []string
		provider string
		wantErr  bool
	}{
		{"auto approves all", "auto", sampleRequest(), []string{"proj/a", "proj/b", "proj/c"}, NameAuto, false},
		{"auto drops repeats", "auto", Request{Paths: []string{"p/x", "p/y", "p/x"}}, []string{"p/x", "p/y"}, NameAuto, false},
		{"auto with no paths", "auto", Request{}, nil, NameAuto, false},
		{"auto refuses a strange access", "auto", Request{Paths: []string{"p/x"}, Access: "execute"}, nil, NameAuto, true},
		{"deny approves none", "deny", sampleRequest(), nil, NameDeny, false},
		{"deny with write", "deny", Request{Paths: []string{"p/x"}, Access: AccessWrite}, nil, NameDeny, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			d, err := p.Ask(ctx, tt.req)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(d.Approved, tt.approved) || d.Provider != tt.provider {
				t.Fatalf("decision = %+v, want approved %q by %q", d, tt.approved, tt.provider)
			}
		})
	}
}

func TestParse(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the cases run shell scripts")
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "ask me")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		spec    string
		wantErr string
		path    string
		args    []string
	}{
		{spec: "auto"},
		{spec: "deny"},
		{spec: "elicit"},
		{spec: "", wantErr: "want auto, deny, prompt, elicit or command"},
		{spec: "Auto", wantErr: "want auto"},
		{spec: "allow", wantErr: "want auto"},
		{spec: "command:", wantErr: "no program"},
		{spec: "command:   ", wantErr: "no program"},
		{spec: "command:" + filepath.Join(dir, "missing"), wantErr: "consent command"},
		{spec: "command:'" + dir, wantErr: "unterminated '"},
		{spec: "command:'" + prog + "'", path: prog},
		{spec: `command:"` + prog + `" --title 'File access' a\ b "q\"x" ''`, path: prog,
			args: []string{"--title", "File access", "a b", `q"x`, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			p, err := Parse(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := p.(*Command); ok {
				if c.path != tt.path || !reflect.DeepEqual(c.args, tt.args) {
					t.Fatalf("command %q %q, want %q %q", c.path, c.args, tt.path, tt.args)
				}
				if c.Name() != "command:"+tt.path || c.timeout != DefaultTimeout {
					t.Fatalf("name %q timeout %s", c.Name(), c.timeout)
				}
			}
		})
	}
	p, err := Parse("command:sh -c true", WithTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if c := p.(*Command); !filepath.IsAbs(c.path) || c.timeout != 3*time.Second {
		t.Fatalf("PATH lookup or timeout: %q %s", c.path, c.timeout)
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  prog  ", []string{"prog"}, false},
		{"prog a\tb", []string{"prog", "a", "b"}, false},
		{`prog 'it''s'`, []string{"prog", "its"}, false},
		{`prog "a \\ b \$"`, []string{"prog", `a \ b \$`}, false},
		{`prog x'y z'"w"`, []string{"prog", "xy zw"}, false},
		{`prog "open`, nil, true},
		{`prog \`, nil, true},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestKeep(t *testing.T) {
	req := []string{"p/a", "p/b", "p/c"}
	tests := []struct {
		approved, want []string
	}{
		{nil, nil},
		{[]string{}, nil},
		{[]string{"p/c", "p/a"}, []string{"p/a", "p/c"}},
		{[]string{"p/a", "p/a", "p/zzz", "p", "p/a/", "P/A", "p/b/x"}, []string{"p/a"}},
		{[]string{"p/zzz"}, nil},
	}
	for _, tt := range tests {
		if got := keep(req, tt.approved); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("keep(%q) = %q, want %q", tt.approved, got, tt.want)
		}
	}
}

func TestStripTerminal(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello, world", "hello, world"},
		{"unicode kept", "Grüße 日本 ✓", "Grüße 日本 ✓"},
		{"colour", "\x1b[31mred\x1b[0m text", "red text"},
		{"clear screen and home", "\x1b[2J\x1b[Hfake", "fake"},
		{"private mode", "\x1b[?1049h\x1b[?25lalt", "alt"},
		{"OSC title with BEL", "\x1b]0;pwned\x07ok", "ok"},
		{"OSC hyperlink with ST", "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"OSC 52 clipboard", "\x1b]52;c;ZXZpbA==\x07x", "x"},
		{"DCS", "\x1bPq#0;2;0;0;0\x1b\\y", "y"},
		{"two-char escapes", "\x1bc\x1b7a\x1b8b\x1b(Bc", "abc"},
		{"C1 CSI", "\u009b31mred", "red"},
		{"C1 OSC", "\u009d0;t\u009cz", "z"},
		{"cut-short CSI", "\x1b[12", ""},
		{"lone ESC", "a\x1b", "a"},
		{"carriage return overwrite", "approve\rdeny", "approve\ndeny"},
		{"CRLF", "a\r\nb", "a\nb"},
		{"backspaces and bell", "abc\b\b\b\x07xyz", "abcxyz"},
		{"tab", "a\tb", "a b"},
		{"NUL and DEL", "a\x00b\x7fc", "abc"},
		{"bidi override", "file\u202etxt.exe", "filetxt.exe"},
		{"isolates and zero width", "a\u2066b\u2069c\u200bd\ufeff", "abcd"},
		{"line separator", "a\u2028b", "a\nb"},
		{"invalid UTF-8", "a\xffb", "a\ufffdb"},
	}
	for _, tt := range tests {
		if got := stripTerminal(tt.in); got != tt.want {
			t.Errorf("%s: stripTerminal(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestMessageLines(t *testing.T) {
	lines, cut := messageLines("  one\n\n\n\ntwo   \n")
	if !reflect.DeepEqual(lines, []string{"one", "", "two"}) || cut {
		t.Fatalf("lines %q cut %v", lines, cut)
	}
	lines, cut = messageLines(strings.Repeat("line\n", 50))
	if len(lines) != maxMessageLines || !cut {
		t.Fatalf("%d lines, cut %v", len(lines), cut)
	}
	lines, cut = messageLines(strings.Repeat("é", 5000))
	if len(lines) != 1 || len([]rune(lines[0])) != maxMessageRunes || !cut {
		t.Fatalf("%d runes, cut %v", len([]rune(lines[0])), cut)
	}
	if lines, _ := messageLines("\x1b[2J\x1b[H"); lines != nil {
		t.Fatalf("escapes only: %q", lines)
	}
}

func TestRender(t *testing.T) {
	req := sampleRequest()
	req.Server = Server{ID: "evil", Name: "evil\x1b[2J\u202e", Version: "1\n2"}
	req.Paths = append(req.Paths, "proj/odd\u202ename", "other/x")
	req.Message = "fsbroker: this server is verified\n\x1b]0;title\x07hi"
	out := render(req)
	for _, want := range []string{
		`Server:  "evil\x1b[2J\u202e" version "1\n2"`,
		"UNVERIFIED",
		"Access:  read",
		"  1. proj/a   (root \"Project\" at /home/ann/proj, read-only)",
		`  4. "proj/odd\u202ename"`,
		"  5. other/x\n",
		"  | fsbroker: this server is verified\n  | hi\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("render lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("render has a control character: %q", out)
	}

	req.Server = Server{ID: "acme-notes", Name: "notes", Version: "2", Pinned: true}
	req.Access = AccessWrite
	out = render(req)
	if strings.Contains(out, "UNVERIFIED") || !strings.Contains(out, `"acme-notes" (identity pinned by the operator)`) ||
		!strings.Contains(out, "write (read, create") {
		t.Errorf("pinned render:\n%s", out)
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("bad\x1b[31m\nthing  here", 100); got != "bad thing here" {
		t.Fatalf("%q", got)
	}
	if got := oneLine("ééééé", 5); got != "éé..." {
		t.Fatalf("%q", got)
	}
}

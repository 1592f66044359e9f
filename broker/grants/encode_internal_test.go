// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

// The documents encodeFile writes, as encoding/json would write them.
type (
	refFile struct {
		Version int        `json:"version"`
		Server  string     `json:"server"`
		Grants  []refGrant `json:"grants"`
		Blocks  []refBlock `json:"blocks"`
	}
	refEvery struct {
		Version    int        `json:"version"`
		AllServers bool       `json:"allServers"`
		Blocks     []refBlock `json:"blocks"`
	}
	refGrant struct {
		ID      string    `json:"id"`
		Access  Access    `json:"access"`
		Path    string    `json:"path"`
		Root    Root      `json:"root,omitzero"`
		Granted time.Time `json:"granted"`
		Expires time.Time `json:"expires,omitzero"`
		By      string    `json:"by"`
	}
	refBlock struct {
		ID      string    `json:"id"`
		Path    string    `json:"path,omitempty"`
		Root    Root      `json:"root,omitzero"`
		Blocked time.Time `json:"blocked"`
		By      string    `json:"by"`
	}
)

// TestEncodeFileMatchesEncodingJSON: the hand-written encoder writes byte for
// byte what json.Encoder with two-space indentation writes for the same
// document (HTML characters escaped, as encoding/json does by default), for
// servers' files with and without blocks and the every-server file, and what
// it writes reads back as the same contents.
func TestEncodeFileMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)
	root := Root{Path: "/home/u/pro<j>&\"q\"", Dev: 2049, Ino: 1 << 40}
	grants := []Grant{
		{ID: "0123456789abcdef01234567", Access: Read, Path: "proj", Root: root, Granted: at, By: ByAuto},
		{ID: "0123456789abcdef01234568", Access: Write, Path: "proj/dir/ä ü/\u2028x<y>&z", Root: root, Granted: at.Add(time.Second),
			Expires: at.Add(time.Hour), By: "command:/usr/bin/ok \"q\""},
		{ID: "0123456789abcdef01234569", Access: Read, Path: "old/no-root", Granted: at, By: ByPrompt},
	}
	blocks := []Block{
		{ID: "aaaaaaaaaaaaaaaaaaaaaaaa", Blocked: at, By: "fsbroker grants revoke by ann (uid 1000)"},
		{ID: "bbbbbbbbbbbbbbbbbbbbbbbb", Path: "proj/secret", Root: root, Blocked: at, By: "op"},
	}
	enc := func(doc any) []byte {
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		e.SetIndent("", "  ")
		if err := e.Encode(doc); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	refGrants := func(gs []Grant) []refGrant {
		out := make([]refGrant, len(gs))
		for i, g := range gs {
			out[i] = refGrant{g.ID, g.Access, g.Path, g.Root, g.Granted, g.Expires, g.By}
		}
		return out
	}
	refBlocks := func(bs []Block) []refBlock {
		out := make([]refBlock, len(bs))
		for i, b := range bs {
			out[i] = refBlock{b.ID, b.Path, b.Root, b.Blocked, b.By}
		}
		return out
	}
	cases := []struct {
		name  string
		every bool
		c     contents
		want  []byte
	}{
		{"grants", false, contents{grants: grants}, enc(refFile{Version: 4, Server: "notes <x>", Grants: refGrants(grants), Blocks: []refBlock{}})},
		{"no grants, blocks", false, contents{blocks: blocks[1:]}, enc(refFile{Version: 4, Server: "notes <x>", Grants: []refGrant{}, Blocks: refBlocks(blocks[1:])})},
		{"grants and blocks", false, contents{grants: grants[:1], blocks: blocks}, enc(refFile{Version: 4, Server: "notes <x>", Grants: refGrants(grants[:1]), Blocks: refBlocks(blocks)})},
		{"every server", true, contents{blocks: blocks}, enc(refEvery{Version: 3, AllServers: true, Blocks: refBlocks(blocks)})},
		{"every server, no blocks", true, contents{}, enc(refEvery{Version: 3, AllServers: true, Blocks: []refBlock{}})},
	}
	for _, c := range cases {
		server := "notes <x>"
		if c.every {
			server = AllServers
		}
		got := encodeFile(server, c.every, c.c)
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: encodeFile wrote\n%s\nencoding/json writes\n%s", c.name, got, c.want)
			continue
		}
		if c.every && len(c.c.blocks) == 0 {
			continue
		}
		_, back, _, err := parse(got, server, c.every)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		want := contents{grants: slices.Clone(c.c.grants), blocks: slices.Clone(c.c.blocks)}
		for i := range want.grants {
			want.grants[i].Server = server
		}
		if !c.every {
			for i := range want.blocks {
				want.blocks[i].Server = server
			}
		}
		sortGrants(want.grants)
		sortBlocks(want.blocks)
		same := func(a, b any, n int) bool { return n == 0 || reflect.DeepEqual(a, b) }
		if len(back.grants) != len(want.grants) || len(back.blocks) != len(want.blocks) ||
			!same(back.grants, want.grants, len(want.grants)) || !same(back.blocks, want.blocks, len(want.blocks)) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v", c.name, back, want)
		}
	}
}

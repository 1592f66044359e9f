// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/fsbroker/fsbroker/broker/internal/keyfile"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// fileIn is a grants file as read (its compacted part in version 4).
// Versions 1 and 2 hold "version", "server" and "grants"; version 3 adds
// "blocks"; version 4 is version 3 followed by appended records (recordIn).
// The every-server file is version 3 with "allServers": true and "blocks",
// and nothing else.
type fileIn struct {
	Version    *int
	Server     *string
	AllServers *bool
	Grants     *grantsParser // the grants, decoded one at a time (decodeFile)
	Blocks     *[]blockIn
}

// recordIn is one appended record of a version 4 file: one grant of the
// file's server, on a line of its own.
type recordIn struct {
	Server *string  `json:"server"`
	Grant  *grantIn `json:"grant"`
}

type grantIn struct {
	ID      *string    `json:"id"`
	Access  *Access    `json:"access"`
	Path    *string    `json:"path"`
	Root    *rootIn    `json:"root"`
	Granted *time.Time `json:"granted"`
	Expires *time.Time `json:"expires"`
	By      *string    `json:"by"`
}

type blockIn struct {
	ID      *string    `json:"id"`
	Path    *string    `json:"path"`
	Root    *rootIn    `json:"root"`
	Blocked *time.Time `json:"blocked"`
	By      *string    `json:"by"`
}

// rootIn is a grant's or a block's root as read: every member must be
// present.
type rootIn struct {
	Path *string `json:"path"`
	Dev  *uint64 `json:"dev"`
	Ino  *uint64 `json:"ino"`
}

// readFile reads and checks a file: a server's (want is the server it must
// belong to; "": any, and the server is returned), or with every the
// every-server file. A missing file is empty, and its server "".
func readFile(path, want string, every bool, limit int) (server string, c contents, st stamp, err error) {
	f, st, _, err := readIfChanged(path, maphash.MakeSeed(), unknownSum)
	if err != nil || f == nil {
		return "", contents{}, st, err
	}
	defer f.Close()
	var h maphash.Hash
	server, c, _, _, err = parseFrom(f, &h, want, every, limit)
	if err != nil {
		return "", contents{}, st, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return server, c, st, nil
}

// fileSum is what a Store remembers of the bytes its cached snapshot was
// made from, to tell without keeping them whether the file still holds
// them: whether the file existed, its length and a hash of its bytes
// (hash/maphash with the Store's seed). A hash that is not cryptographic is
// enough: it tells this Store's own last write apart from another
// process's change, and a process that can write the grants directory
// controls the grants anyway.
type fileSum struct {
	exists bool
	size   int
	hash   uint64
}

// unknownSum matches no file: the file is read and parsed.
var unknownSum = fileSum{exists: true, size: -1}

// sumOf sums b (nil: no file).
func sumOf(seed maphash.Seed, b []byte) fileSum {
	if b == nil {
		return fileSum{}
	}
	return fileSum{exists: true, size: len(b), hash: maphash.Bytes(seed, b)}
}

// readIfChanged opens the file at path and tells whether it still holds
// the bytes known sums (same), reading it through a small buffer, none of
// it kept; when it does not, f is at its start, for parseFrom. f is the file,
// still open, for the caller to close or hold (nil when it does not exist,
// or on an error). A file that is not a regular file is corrupt.
func readIfChanged(path string, seed maphash.Seed, known fileSum) (f *os.File, st stamp, same bool, err error) {
	f, err = os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, stamp{}, !known.exists, nil
	}
	if err != nil {
		return nil, stamp{}, false, err
	}
	st, same, err = checkOpen(f, seed, known)
	if err != nil {
		f.Close()
		return nil, st, false, err
	}
	return f, st, same, nil
}

// checkOpen is readIfChanged on the open file f.
func checkOpen(f *os.File, seed maphash.Seed, known fileSum) (st stamp, same bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return stamp{}, false, err
	}
	st = keyfile.StampOf(fi)
	if !fi.Mode().IsRegular() {
		return st, false, fmt.Errorf("%w: not a regular file", ErrCorrupt)
	}
	if fi.Size() > maxFileSize {
		return st, false, fmt.Errorf("%w: larger than %d bytes", ErrCorrupt, maxFileSize)
	}
	if !known.exists || fi.Size() != int64(known.size) {
		return st, false, nil
	}
	var h maphash.Hash
	h.SetSeed(seed)
	n, err := io.Copy(&h, io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return st, false, err
	}
	if n == int64(known.size) && h.Sum64() == known.hash {
		return st, true, nil
	}
	_, err = f.Seek(0, io.SeekStart)
	return st, false, err
}

// hashingReader reads r, adding what it reads to h and counting it.
type hashingReader struct {
	r io.Reader
	h *maphash.Hash
	n int
}

func (x *hashingReader) Read(p []byte) (int, error) {
	n, err := x.r.Read(p)
	x.h.Write(p[:n])
	x.n += n
	return n, err
}

// parseFrom decodes and checks the file r as parse does, streaming it: the
// file is never held whole, only its records (the part after its JSON
// object), so that reading a file of many grants takes little more memory
// than the grants. Its bytes go to h (seeded by the caller), and their
// count is returned. A file larger than maxFileSize is an error.
func parseFrom(r io.Reader, h *maphash.Hash, want string, every bool, limit int) (string, contents, layout, int, error) {
	hr := &hashingReader{r: io.LimitReader(r, maxFileSize+1), h: h}
	server, c, lay, err := parseReader(hr, want, every, limit)
	if err == nil {
		_, err = io.Copy(io.Discard, hr) // what the parse left unread: none, normally
	}
	if err == nil && hr.n > maxFileSize {
		err = fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	return server, c, lay, hr.n, err
}

// layout is how a server's file is laid out: what Grant needs to know to
// append a record to it rather than rewrite it.
type layout struct {
	// appendable is true for a version 4 file that ends with a complete
	// record (or its compacted part): a record may be appended.
	appendable bool
	// base is the length of the compacted part (the JSON object and its
	// newline); appended that of the complete records after it.
	base, appended int
}

// parse decodes and checks a file's content. In a version 4 file, the
// bytes after the last newline are a record whose append was cut short (a
// crash mid-write, or a write still under way): they are ignored, and the
// file is not appendable until rewritten. Anything else that is not a
// complete, valid record of the file's server is an error.
func parse(b []byte, want string, every bool) (string, contents, layout, error) {
	return parseReader(bytes.NewReader(b), want, every, DefaultMaxGrants)
}

// parseReader is parse of the file r, refusing a file of more than limit
// grants (which no fsbroker writes) as soon as it reads one more, so that a
// hostile file costs no more memory than a server's grants at the limit.
func parseReader(r io.Reader, want string, every bool, limit int) (string, contents, layout, error) {
	ahead := &readAhead{r: r}
	dec := json.NewDecoder(ahead)
	ahead.dec = dec
	dec.DisallowUnknownFields()
	in, err := decodeFile(dec, limit)
	ahead.dec = nil // the records are bounded line by line (readRecords)
	if err != nil {
		return "", contents{}, layout{}, err
	}
	if in.Version == nil {
		return "", contents{}, layout{}, errors.New(`"version" is required`)
	}
	version := *in.Version
	if version < formatVersionNoRoots || version > FormatVersion {
		return "", contents{}, layout{}, fmt.Errorf("version %d is not supported (this fsbroker reads versions %d to %d; a newer one may have written it)",
			version, formatVersionNoRoots, FormatVersion)
	}
	hasRecords := version == FormatVersion && !every
	if !hasRecords {
		if _, err := dec.Token(); err != io.EOF {
			return "", contents{}, layout{}, errors.New("data after the JSON object")
		}
	}
	if every {
		if version != formatVersionAllServers || in.AllServers == nil || !*in.AllServers || in.Blocks == nil || in.Server != nil || in.Grants != nil {
			return "", contents{}, layout{}, fmt.Errorf(`the blocks for every server are a version %d object with "allServers": true and "blocks", and nothing else`, formatVersionAllServers)
		}
		bs, err := parseBlocks(*in.Blocks)
		return AllServers, contents{blocks: bs}, layout{}, err
	}
	switch {
	case in.AllServers != nil:
		return "", contents{}, layout{}, errors.New(`"allServers" belongs in the file of the blocks for every server only`)
	case in.Server == nil || in.Grants == nil:
		return "", contents{}, layout{}, errors.New(`"version", "server" and "grants" are required`)
	case version >= formatVersionBlocks && in.Blocks == nil:
		return "", contents{}, layout{}, fmt.Errorf(`"blocks" is required in version %d`, version)
	case version < formatVersionBlocks && in.Blocks != nil:
		return "", contents{}, layout{}, fmt.Errorf(`"blocks" in a version %d file (blocks came with version %d)`, version, formatVersionBlocks)
	case want != "" && *in.Server != want:
		return "", contents{}, layout{}, fmt.Errorf("it holds the grants of server %q", *in.Server)
	}
	server := *in.Server
	if err := validServer(server); err != nil {
		return "", contents{}, layout{}, err
	}
	var lay layout
	if hasRecords {
		if lay, err = readRecords(io.MultiReader(dec.Buffered(), r), int(dec.InputOffset()), server, in.Grants); err != nil {
			return "", contents{}, layout{}, err
		}
	}
	gs, err := in.Grants.done(server, version)
	if err != nil {
		return "", contents{}, layout{}, err
	}
	var bs []Block
	if in.Blocks != nil {
		if bs, err = parseBlocks(*in.Blocks); err != nil {
			return "", contents{}, layout{}, err
		}
		for i := range bs {
			bs[i].Server = server
		}
	}
	return server, contents{grants: gs, blocks: bs}, lay, nil
}

// readAhead is the reader of a file's JSON object: it refuses to read
// more than maxRecordBytes past where dec is decoding, so that no value
// (the decoder buffers each whole) is longer than a grant at the limits of
// its members, nor costs more memory. Without dec it reads r as it is.
type readAhead struct {
	r   io.Reader
	dec *json.Decoder
	n   int64 // bytes read
}

func (a *readAhead) Read(p []byte) (int, error) {
	if a.dec != nil && a.n-a.dec.InputOffset() > maxRecordBytes {
		return 0, fmt.Errorf("a value longer than %d bytes", maxRecordBytes)
	}
	n, err := a.r.Read(p)
	a.n += int64(n)
	return n, err
}

// maxRecordBytes bounds an appended record's line: a grant at the limits
// of its members, each escaped at up to 6 bytes a byte, and the syntax. A
// longer line is no record (the file is corrupt), and is not read whole.
const maxRecordBytes = 6*(MaxServerBytes+maxIDBytes+MaxPathBytes+MaxRootBytes+MaxByBytes) + 1024

// readRecords reads what follows a version 4 file's JSON object (which
// ends at off): the object's newline, then complete records, each a line,
// then perhaps a cut record (no newline yet), which is left out; each
// record's grant of server goes to p. A line is read at a time, never the
// records whole.
func readRecords(r io.Reader, off int, server string, p *grantsParser) (layout, error) {
	br := bufio.NewReader(r)
	if b, err := br.ReadByte(); err != nil || b != '\n' {
		return layout{}, errors.New("the JSON object does not end with a newline")
	}
	lay := layout{base: off + 1, appendable: true}
	var line []byte
	for i := 0; ; i++ {
		line = line[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if len(line)+len(chunk) > maxRecordBytes+1 {
				return layout{}, fmt.Errorf("appended record %d: longer than %d bytes", i, maxRecordBytes)
			}
			line = append(line, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err == io.EOF {
			// A cut record (or none): ignored, and the file is not
			// appendable until rewritten.
			lay.appendable = len(line) == 0
			return lay, nil
		}
		if err != nil {
			return layout{}, err
		}
		lay.appended += len(line)
		g, err := parseRecord(line[:len(line)-1], server)
		if err == nil {
			err = p.add(g)
		}
		if err != nil {
			return layout{}, fmt.Errorf("appended record %d: %v", i, err)
		}
	}
}

// parseRecord decodes one appended record (a line without its newline): a
// grant of server, nothing else.
func parseRecord(line []byte, server string) (grantIn, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var r recordIn
	if err := dec.Decode(&r); err != nil {
		return grantIn{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return grantIn{}, errors.New("data after the record")
	}
	switch {
	case r.Server == nil || r.Grant == nil:
		return grantIn{}, errors.New(`"server" and "grant" are required`)
	case *r.Server != server:
		return grantIn{}, fmt.Errorf("it names server %q, not the file's", *r.Server)
	}
	return *r.Grant, nil
}

// decodeFile decodes a file's JSON object member by member, and its grants
// one at a time, each checked and kept as a Grant as it is read
// (grantsParser): a file of many grants is never held as decoded JSON as
// well as its Grants, and the decoder buffers one grant, not the file. A
// member this fsbroker does not know, or one given twice, is an error.
func decodeFile(dec *json.Decoder, limit int) (fileIn, error) {
	var in fileIn
	if err := expectDelim(dec, '{'); err != nil {
		return fileIn{}, err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fileIn{}, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fileIn{}, fmt.Errorf("member %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "version":
			err = dec.Decode(&in.Version)
		case "server":
			err = dec.Decode(&in.Server)
		case "allServers":
			err = dec.Decode(&in.AllServers)
		case "blocks":
			in.Blocks, err = decodeBlocks(dec, limit)
		case "grants":
			in.Grants = &grantsParser{limit: limit}
			if err = expectDelim(dec, '['); err != nil {
				break
			}
			for err == nil && dec.More() {
				var g grantIn
				if err = dec.Decode(&g); err == nil {
					err = in.Grants.add(g)
				}
			}
			if err == nil {
				err = expectDelim(dec, ']')
			}
		default:
			err = fmt.Errorf("unknown member %q", key)
		}
		if err != nil {
			return fileIn{}, err
		}
	}
	return in, expectDelim(dec, '}')
}

// decodeBlocks decodes a file's blocks one at a time, refusing more than
// limit (which no fsbroker writes) as soon as it reads one more.
func decodeBlocks(dec *json.Decoder, limit int) (*[]blockIn, error) {
	if err := expectDelim(dec, '['); err != nil {
		return nil, err
	}
	var bs []blockIn
	for dec.More() {
		if len(bs) >= limit {
			return nil, fmt.Errorf("more than %d blocks, the limit of a file", limit)
		}
		var b blockIn
		if err := dec.Decode(&b); err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	if err := expectDelim(dec, ']'); err != nil {
		return nil, err
	}
	return &bs, nil
}

// expectDelim reads the next token, which must be d.
func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("%v where %q belongs", tok, d)
	}
	return nil
}

// grantsParser checks a file's grants as they are read (add), then as a
// whole (done).
type grantsParser struct {
	gs     []Grant
	limit  int // the most grants a file may hold
	rooted int // 1 + the index of the first grant with a root (refused in version 1)
	root   Root
}

// add checks one grant read from the file (the grants of its JSON object,
// then those of its records) and keeps it.
func (p *grantsParser) add(g grantIn) error {
	i := len(p.gs)
	if i >= p.limit {
		return fmt.Errorf("more than %d grants, the limit of a server", p.limit)
	}
	if g.ID == nil || g.Access == nil || g.Path == nil || g.Granted == nil || g.By == nil {
		return fmt.Errorf(`grant %d: "id", "access", "path", "granted" and "by" are required`, i)
	}
	out := Grant{ID: *g.ID, Access: *g.Access, Path: *g.Path, Granted: g.Granted.UTC(), By: *g.By}
	if g.Expires != nil {
		out.Expires = g.Expires.UTC()
	}
	err := validID(out.ID)
	if err == nil && g.Root != nil {
		if p.rooted == 0 {
			p.rooted = i + 1
		}
		out.Root, err = readRoot(*g.Root)
		if err == nil && out.Root == p.root {
			out.Root = p.root // one copy of a root's path for the grants that share it
		}
		p.root = out.Root
	}
	switch {
	case err != nil:
	case !out.Access.Valid():
		err = fmt.Errorf("access %q: want read or write", out.Access)
	case out.Granted.IsZero():
		err = errors.New("no granted time")
	}
	if err == nil {
		out.Access = Read // one copy of each access's name
		if *g.Access == Write {
			out.Access = Write
		}
	}
	if err == nil {
		err = ValidPath(out.Path)
	}
	if err == nil {
		err = validBy(out.By)
	}
	if err != nil {
		return fmt.Errorf("grant %d: %v", i, err)
	}
	p.gs = append(p.gs, out)
	return nil
}

// done returns the grants read, of server, sorted, from a file of version.
func (p *grantsParser) done(server string, version int) ([]Grant, error) {
	if version == formatVersionNoRoots && p.rooted != 0 {
		return nil, fmt.Errorf(`grant %d: "root" in a version 1 file`, p.rooted-1)
	}
	gs := make([]Grant, len(p.gs)) // exactly as many: the file's grants are kept for as long as it is unchanged
	copy(gs, p.gs)
	p.gs = nil
	for i := range gs {
		gs[i].Server = server
	}
	// No two grants share an ID, nor a path, access and root: found by
	// sorting rather than by maps, which would take more memory than the
	// grants at the limit.
	sortGrants(gs)
	for i := 1; i < len(gs); i++ {
		// The grants on one path with one access are a run; its roots are
		// compared pairwise (a run holds one grant per root).
		for j := i - 1; j >= 0 && gs[j].Path == gs[i].Path && gs[j].Access == gs[i].Access; j-- {
			if gs[j].Root == gs[i].Root {
				return nil, fmt.Errorf("a second %s grant on %q under one root", gs[i].Access, gs[i].Path)
			}
		}
	}
	ids := make([]string, len(gs))
	for i := range gs {
		ids[i] = gs[i].ID
	}
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return nil, fmt.Errorf("a second grant with id %q", ids[i])
		}
	}
	return gs, nil
}

// parseBlocks checks the blocks of a file (their Server is the caller's to
// set).
func parseBlocks(in []blockIn) ([]Block, error) {
	bs := make([]Block, 0, len(in))
	ids := make(map[string]bool, len(in))
	paths := make(map[string]bool, len(in))
	for i, b := range in {
		if b.ID == nil || b.Blocked == nil || b.By == nil {
			return nil, fmt.Errorf(`block %d: "id", "blocked" and "by" are required`, i)
		}
		out := Block{ID: *b.ID, Blocked: b.Blocked.UTC(), By: *b.By}
		err := validID(out.ID)
		if err == nil && b.Path != nil {
			out.Path = *b.Path
			err = ValidPath(out.Path)
		}
		if err == nil && b.Root != nil {
			out.Root, err = readRoot(*b.Root)
		}
		switch {
		case err != nil:
		case b.Path == nil && b.Root != nil:
			err = errors.New(`a "root" without a "path"`)
		case out.Blocked.IsZero():
			err = errors.New("no blocked time")
		case ids[out.ID]:
			err = fmt.Errorf("a second block with id %q", out.ID)
		case paths[out.Path]:
			err = fmt.Errorf("a second block on %q", out.Path)
		}
		if err == nil {
			err = validBy(out.By)
		}
		if err != nil {
			return nil, fmt.Errorf("block %d: %v", i, err)
		}
		ids[out.ID], paths[out.Path] = true, true
		bs = append(bs, out)
	}
	sortBlocks(bs)
	return bs, nil
}

// readRoot checks a root read from a file: every member present, and a
// valid root.
func readRoot(r rootIn) (Root, error) {
	if r.Path == nil || r.Dev == nil || r.Ino == nil {
		return Root{}, errors.New(`root: "path", "dev" and "ino" are required`)
	}
	out := Root{Path: *r.Path, Dev: *r.Dev, Ino: *r.Ino}
	if err := validRoot(out); err != nil {
		return Root{}, err
	}
	return out, nil
}

// write replaces an entry's file with c, atomically and durably, under its
// exclusive lock, and returns the new file's stamp: the compaction of a
// server's file, which drops its appended records (written as version 4,
// which an fsbroker from before appended records refuses, granting that
// server nothing rather than acting on part of its grants). Nothing to keep
// removes the file. The bytes written are returned too (nil for a removed
// file): the Store sums them.
func (s *Store) write(e *entry, c contents) (stamp, []byte, error) {
	if len(c.grants) == 0 && len(c.blocks) == 0 {
		return stamp{}, nil, s.files.Remove(e.name)
	}
	buf := encodeFile(e.server, e.every, c)
	if len(buf) > maxFileSize {
		return stamp{}, nil, fmt.Errorf("%w: the grants and blocks take %d bytes; a file holds at most %d", ErrTooMany, len(buf), maxFileSize)
	}
	st, err := s.files.Replace(e.name, buf)
	return st, buf, err
}

// encodeFile is the file of a server's contents c, or with every of the
// blocks for every server: a server's file is version 4 (its compacted
// part, without records), the every-server file version 3 with
// "allServers" and "blocks". It is written by hand rather than by
// encoding/json's reflection, byte for byte what json.Encoder with
// two-space indentation writes for the same document
// (TestEncodeFileMatchesEncodingJSON): a compaction writes every grant the
// server holds.
func encodeFile(server string, every bool, c contents) []byte {
	size := 256 + len(server)
	for i := range c.grants { // the syntax, times and numbers take under 300 bytes
		g := &c.grants[i]
		size += 300 + len(g.ID) + len(g.Path) + len(g.Root.Path) + len(g.By)
	}
	for i := range c.blocks {
		bl := &c.blocks[i]
		size += 300 + len(bl.ID) + len(bl.Path) + len(bl.Root.Path) + len(bl.By)
	}
	b := make([]byte, 0, size) // one allocation: the file of a server with many grants is large
	if every {
		b = fmt.Appendf(b, "{\n  \"version\": %d,\n  \"allServers\": true,\n  \"blocks\": ", formatVersionAllServers)
		b = appendBlocks(b, c.blocks)
		return append(b, "\n}\n"...)
	}
	b = fmt.Appendf(b, "{\n  \"version\": %d,\n  \"server\": ", FormatVersion)
	b = jsonx.AppendString(b, server)
	b = append(b, ",\n  \"grants\": "...)
	if len(c.grants) == 0 {
		b = append(b, "[]"...)
	} else {
		b = append(b, '[')
		var root rootMember
		for i, g := range c.grants {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n    {\n      "...)
			b = appendGrant(b, &g, &root, "\n      ")
			b = append(b, "\n    }"...)
		}
		b = append(b, "\n  ]"...)
	}
	b = append(b, ",\n  \"blocks\": "...)
	b = appendBlocks(b, c.blocks)
	return append(b, "\n}\n"...)
}

// appendGrant appends the members of grant g, each but the first after sep
// (a newline and the indentation of the compacted part, or a space for a
// record).
func appendGrant(b []byte, g *Grant, root *rootMember, sep string) []byte {
	b = append(b, `"id": `...)
	b = jsonx.AppendString(b, g.ID)
	b = append(b, ',')
	b = append(b, sep...)
	b = append(b, `"access": `...)
	b = jsonx.AppendString(b, g.Access)
	b = append(b, ',')
	b = append(b, sep...)
	b = append(b, `"path": `...)
	b = jsonx.AppendString(b, g.Path)
	b = root.append(b, g.Root)
	b = append(b, ',')
	b = append(b, sep...)
	b = append(b, `"granted": `...)
	b = appendTime(b, g.Granted)
	if !g.Expires.IsZero() {
		b = append(b, ',')
		b = append(b, sep...)
		b = append(b, `"expires": `...)
		b = appendTime(b, g.Expires)
	}
	b = append(b, ',')
	b = append(b, sep...)
	b = append(b, `"by": `...)
	b = jsonx.AppendString(b, g.By)
	return b
}

// appendRecords appends gs as the records a Grant appends to server's file:
// one line each, {"server": ..., "grant": {...}}.
func appendRecords(b []byte, server string, gs []Grant) []byte {
	root := rootMember{record: true}
	for i := range gs {
		b = append(b, `{"server": `...)
		b = jsonx.AppendString(b, server)
		b = append(b, `, "grant": {`...)
		b = appendGrant(b, &gs[i], &root, " ")
		b = append(b, "}}\n"...)
	}
	return b
}

// appendBlocks appends blocks as the array member of encodeFile's document.
func appendBlocks(b []byte, blocks []Block) []byte {
	if len(blocks) == 0 {
		return append(b, "[]"...)
	}
	b = append(b, '[')
	for i, bl := range blocks {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    {\n      \"id\": "...)
		b = jsonx.AppendString(b, bl.ID)
		if bl.Path != "" {
			b = append(b, ",\n      \"path\": "...)
			b = jsonx.AppendString(b, bl.Path)
		}
		b = appendRoot(b, bl.Root)
		b = append(b, ",\n      \"blocked\": "...)
		b = appendTime(b, bl.Blocked)
		b = append(b, ",\n      \"by\": "...)
		b = jsonx.AppendString(b, bl.By)
		b = append(b, "\n    }"...)
	}
	return append(b, "\n  ]"...)
}

// appendRoot appends the "root" member of a grant or a block, nothing for
// the zero Root.
func appendRoot(b []byte, r Root) []byte {
	if r == (Root{}) {
		return b
	}
	b = append(b, ",\n      \"root\": {\n        \"path\": "...)
	b = jsonx.AppendString(b, r.Path)
	b = append(b, ",\n        \"dev\": "...)
	b = strconv.AppendUint(b, r.Dev, 10)
	b = append(b, ",\n        \"ino\": "...)
	b = strconv.AppendUint(b, r.Ino, 10)
	return append(b, "\n      }"...)
}

// appendRecordRoot appends the "root" member of an appended record's grant
// (on one line), nothing for the zero Root.
func appendRecordRoot(b []byte, r Root) []byte {
	if r == (Root{}) {
		return b
	}
	b = append(b, `, "root": {"path": `...)
	b = jsonx.AppendString(b, r.Path)
	b = append(b, `, "dev": `...)
	b = strconv.AppendUint(b, r.Dev, 10)
	b = append(b, `, "ino": `...)
	b = strconv.AppendUint(b, r.Ino, 10)
	return append(b, '}')
}

// rootMember appends the "root" members of a file's grants, which mostly
// share one root: the last one encoded is kept and copied. With record
// set, as appendRecordRoot writes them.
type rootMember struct {
	record  bool
	root    Root
	encoded []byte
}

func (m *rootMember) append(b []byte, r Root) []byte {
	if m.encoded == nil || r != m.root {
		m.root = r
		if m.record {
			m.encoded = appendRecordRoot(m.encoded[:0], r)
		} else {
			m.encoded = appendRoot(m.encoded[:0], r)
		}
	}
	return append(b, m.encoded...)
}

// appendTime appends t as encoding/json writes a time.Time: RFC 3339 with
// nanoseconds, quoted.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

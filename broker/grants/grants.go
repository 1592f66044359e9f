// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package grants keeps the consent grants of MCP servers: which server may
// read, or read and write, which mount-relative paths, since when, until
// when, and who said so. Grants are persisted in the broker's state
// directory, so that every broker process on that directory shares them, a
// restart keeps them, and `fsbroker grants revoke` in another process takes
// them away from running sessions within a second.
//
// # Grants
//
// A Grant gives one server Read or Write access to a path written as
// PROTOCOL.md section 3 writes paths the broker returns: mount-relative,
// "mount/dir/file", already canonical (no empty, "." or ".." segment, no
// leading or trailing "/"; ValidPath is the check). A grant covers its path
// and everything beneath it at a segment boundary: "proj/dir" covers
// "proj/dir" and "proj/dir/x", not "proj/dirx"; a grant on a mount alone
// ("proj") covers the whole root. Write implies read: a write grant covers
// reading too, a read grant never covers a change.
//
// A grant with a zero Expires never expires. Otherwise it is live up to and
// including the instant Expires, and expired at every later instant: live
// iff !now.After(Expires). This is the rule of the default policy set
// (policies/readonly.rego, grant_live: expires >= now), so that the broker's
// consent check and the policy never disagree about a grant at its last
// nanosecond. An expired grant never counts; it is dropped from its file by
// the next change to that server's grants.
//
// Every grant has an ID (24 hex digits from crypto/rand, assigned by the
// Store) that revocation and the audit trail name, the time it was Granted,
// and By: the consent provider that approved it (ByAuto, ByPrompt,
// ByCommand, ByPreapproved, or another name, such as "command:PROG" as
// broker/consent's providers name themselves). Granting a path and
// access a server already holds under the same Root does not add a second
// grant: the existing one takes the new Expires, Granted and By (the latest
// consent decision stands, even when it is shorter) and keeps its ID.
//
// # Identity
//
// Grants belong to a server identity: a string the caller chooses, the
// operator-pinned id of the server when there is one, else the
// serverInfo.name the server declared in initialize. The Store does not
// know which kind it was given; the two share one namespace, which is the
// point of pinning. A declared name is only a claim: any server can declare
// itself "notes" and inherit every grant made to a server that declared the
// same name. A pinned id is the operator's statement of which program this
// is (the command line it was started with), which a server cannot choose,
// so grants made to a pinned id are only as shareable as the operator makes
// them. Policies should make persistent or broad grants only to pinned
// servers (input.server.pinned).
//
// # Blocks
//
// An operator may pre-approve a root for every server (the broker's
// configuration, not this package). A pre-approval is revocable like a
// grant: a Block takes it away from one server, or from every server
// (AllServers, those never seen included), on a path and beneath it or on
// every path, until Restore removes the block. A block takes away nothing a
// grant covers: a server that asks again and is approved holds a grant, and
// the grant covers, block or not. The broker's rule is thus: a live grant
// covers the path, or the path's root is pre-approved and Blocked reports no
// block for the server. A block records the Root of its path's mount when
// its maker knew it, to say which directory was meant, but applies to the
// path whatever directory the mount names later: a block holds until it is
// removed.
//
// # Files
//
// The store is one directory, by convention <state-dir>/grants (DirName),
// created 0700. Each server identity has its own files there, named by the
// lowercase hex SHA-256 of the identity, so no identity ("../x", "a/b", a
// name with control characters, a very long or non-ASCII one) can name a
// file outside the directory or collide with another identity's. The blocks
// for every server are kept under the name of the empty identity, which no
// server can have (e3b0c442...b855, the SHA-256 of nothing; Path(AllServers)):
//
//	<sha256>.json        the server's grants and blocks (absent when it has none)
//	<sha256>.lock        an empty sidecar lock file, never deleted
//	.tmp-<sha256>.json-* a replacement being written (left only by a crash)
//
// A server's file is one JSON object, written indented (0600), followed by
// appended records (below):
//
//	{
//	  "version": 4,
//	  "server": "notes",
//	  "grants": [
//	    {"id": "6f1c...", "access": "write", "path": "proj/docs",
//	     "root": {"path": "/home/user/proj", "dev": 2049, "ino": 1311233},
//	     "granted": "2026-03-01T09:00:00Z", "expires": "2026-03-01T17:00:00Z", "by": "prompt"}
//	  ],
//	  "blocks": [
//	    {"id": "9d2e...", "path": "proj/secret",
//	     "root": {"path": "/home/user/proj", "dev": 2049, "ino": 1311233},
//	     "blocked": "2026-03-02T10:00:00Z", "by": "fsbroker grants revoke by ann (uid 1000)"}
//	  ]
//	}
//
// "server" is the identity, for a person reading the file and to check that
// the file is the one of its name; "expires" is left out for a grant that
// never expires; times are RFC 3339 in UTC with nanoseconds. "root" is the
// grant's Root (below), or the block's when known; a block without "path"
// blocks every path. The file of the blocks for every server holds
// {"version": 3, "allServers": true, "blocks": [...]} and nothing else.
//
// A Grant of grants the server does not hold yet appends one line per grant
// to the file, under its lock, and syncs it:
//
//	{"server": "notes", "grant": {"id": "0a4f...", "access": "read", "path": "proj/a.go", "root": {...}, "granted": "...", "by": "auto"}}
//
// Anything else (a refreshed grant, Revoke, Block, Restore, an expired grant
// to drop, or records that would outgrow the JSON object before them)
// rewrites the file: a new JSON object, no records, renamed into place. A
// last line without its newline is a record cut short (a crash mid-append,
// or an append under way) and is ignored; any other line that is not a
// complete grant of the file's server makes the file corrupt.
//
// Version 4 came with appended records; version 3 with blocks, version 2
// with roots. A server's file is written as version 4, which an fsbroker
// from before it refuses (as corrupt: that server is granted nothing)
// rather than act on part of the grants; brokers sharing a state directory
// should be of one version. Files of versions 1 to 3 are read and rewritten
// as version 4 by the next change; version 1 grants have no root, and so
// cover nothing. A file of another version, with unknown members, or with
// any invalid grant or block is corrupt.
//
// # Roots
//
// A grant's path starts with a mount, and a mount is only a name: the
// operator may later give it to another directory (two configurations
// whose directories share a base name, say). So every grant also records
// the Root its mount named when consent was given: the root's canonical
// (symlink-resolved) directory and its device and inode numbers. A grant
// covers a path only under that same root: Covers takes the Root the
// path's mount names now, and a grant whose Root differs (another
// directory, or the same path re-created as another inode) covers nothing.
// A grant without a Root (from a version 1 file) covers nothing either.
//
// One file per identity rather than one for all: the broker reads the
// grants of one server on every request of that server, and each server's
// cache, lock and change notification is then its own. A grant made to one
// server neither invalidates the cache of another nor waits for its lock,
// and Watch reports which server changed without diffing a shared file. A
// revocation across servers (RevokeFilter with no Server) is then one atomic
// change per server, not one for all: a process that reads while it runs may
// see some servers' grants revoked and others not yet.
//
// # Concurrency
//
// A Store is safe for use by many goroutines, and any number of Stores, in
// one process or many, may share a directory. Every change (Grant, Revoke,
// Block, Restore) is a read-modify-write under the file's exclusive sidecar lock
// (github.com/gofrs/flock: flock(2) on unix, LockFileEx on Windows; the
// kernel releases it when its process dies), so concurrent changes from any
// process are serialised and none is lost. The new file is written to a
// temporary file in the directory, synced, renamed over the old one, and the
// directory is synced: a crash at any moment leaves the old grants or the
// new ones, never a torn file. Reading takes no lock: the rename is atomic,
// so a reader sees the old file or the new, and a revocation check never
// waits behind a writer. (On Windows, where a file open in another process
// cannot be renamed over, a Grant or Revoke that meets a reader mid-read
// fails with the error and changes nothing; it can be retried.)
//
// # Staleness and revocation latency
//
// Covers (and Blocked, for a pre-approved root) is on the path of every
// request, so each Store keeps each file's grants and blocks in memory and
// answers from there. The cache is re-validated when any of these happens,
// whichever is first:
//
//   - Watch (fsnotify on the directory) sees the server's file change, in
//     any process: the cache is invalidated at once and the next Covers
//     rereads the file; Watch then tells the caller which server changed
//     (AnyServer for the blocks for every server).
//     This is the normal path, and takes milliseconds.
//   - The cache was last checked WithMaxStale ago (default 500ms): one stat(2)
//     of the file (identity, size, modification time) decides whether to
//     reread it. This is the safety net for a missed event (a watcher queue
//     overflow is reported as a change of every server, but file systems
//     such as NFS deliver no events for other hosts' changes).
//   - The file was last read or written whole 10 times the maximum
//     staleness ago: it is reread even when the stat shows no change, to
//     see a change written in place that kept the file's size and
//     modification time (no fsbroker writer makes one).
//
// The Store keeps the file it last read or wrote open, so that its inode
// number is not reused, and a stat that shows that inode with the size and
// modification time the Store left stands for a read: every fsbroker
// writer renames a new file into place or appends, changing one of them.
// So a Watch's report of the Store's own append costs one stat. A reread
// parses the file only when its bytes differ from those the cache was made
// from (what this Store last wrote or read; the cache keeps their length
// and a hash, not the bytes). An append under the lock trusts the stat as
// above (it writes over nothing); a rewrite reads the file under the lock
// first: another process's change is always seen, and never written over.
//
// A change by the same Store is visible to it at once. A revocation or a
// block by another process is thus seen by a Store with a running Watch within
// milliseconds, and by any Store within the maximum staleness (500ms by
// default, plus one stat and one read), which is within PROTOCOL.md's bound:
// "a revocation takes effect for new requests within 1 second".
//
// # Cost
//
// Covers, Blocked and Related answer from the cache by binary search on the
// grants, which are kept sorted by path: in time logarithmic in a server's
// grants (plus, for Related, the grants returned). A new grant is one
// append and one sync, and an insertion into a small sorted run of recent
// grants that is merged into the rest once it outgrows their square root:
// its cost does not grow with the grants held (BenchmarkGrantOne). A
// rewrite (Revoke, Block, Restore, a sweep, a compaction) reads the file,
// writes every grant and syncs, in time linear in the server's grants; the
// compactions write each grant a bounded number of times, amortized.
//
// # Failure
//
// A grants file that cannot be parsed, is larger than 32 MiB, names another
// server, has an unsupported version, or holds an invalid or duplicate
// grant is corrupt: Covers, List and Grant return an *Error matching
// ErrCorrupt (errors.Is) with the file's path, never an empty set of grants
// silently, and Grant and Revoke leave the file untouched. The broker then
// fails closed: without trustworthy grants there is no grant. A file that
// cannot be read, a lock not obtained within the lock wait (WithLockWait),
// or a write that fails is an *Error too. An operator inspects the file
// named in the error and restores it, or removes it, which revokes every
// grant of that server. ListAll, and Revoke across servers, go on past a
// corrupt file: they return what they could do and an error naming each file
// they could not read. A corrupt file of blocks (a server's, or the one for
// every server) makes Blocked fail, and the broker then treats the path as
// blocked.
//
// A server holds at most WithMaxGrants grants (default 30,000, set by
// fsbroker serve's memory budget: docs/consent.md), and as many
// blocks (the every-server file too): a Grant or Block that would exceed it
// fails with ErrTooMany, so that a server approved automatically cannot
// grow its file without bound. A file holding more grants or blocks (which
// no fsbroker writes) is corrupt, found so as soon as one more is read; a
// record's line is read at a time, never the records whole: a hostile file
// costs no more memory than the grants and blocks at the limit.
package grants

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// DirName is the name of the grants directory inside the broker's state
// directory: Open(filepath.Join(stateDir, grants.DirName)).
const DirName = "grants"

// FormatVersion is the version of the files this fsbroker writes for a
// server (version 4): a JSON object with "version", "server", "grants" and
// "blocks" (the compacted part), then zero or more appended records, one a
// line, each {"server": ..., "grant": {...}} adding one grant. An fsbroker
// from before version 4 refuses such a file as corrupt, granting nothing,
// rather than ignoring the appended grants or a revocation. Versions 1 to 3
// (no appended records) are read, and rewritten as version 4 by the next
// change.
const FormatVersion = 4

// formatVersionAllServers is the version of the file of the blocks for
// every server, which is never appended to: "allServers": true and
// "blocks".
const formatVersionAllServers = 3

// formatVersionBlocks is the version of a server's file that holds blocks,
// written before version 4.
const formatVersionBlocks = 3

// formatVersionNoBlocks is the version of a server's file without blocks.
const formatVersionNoBlocks = 2

// formatVersionNoRoots is the version of the files written before grants
// carried their Root.
const formatVersionNoRoots = 1

// Access is what a grant allows.
type Access string

// The accesses.
const (
	// Read allows reading, listing and watching.
	Read Access = "read"
	// Write allows changes, and reading.
	Write Access = "write"
)

// Valid reports whether a is Read or Write.
func (a Access) Valid() bool { return a == Read || a == Write }

// Allows reports whether a grant of access a covers an operation that needs
// need: write implies read, read does not imply write.
func (a Access) Allows(need Access) bool {
	return a == Write && need.Valid() || a == Read && need == Read
}

// The consent providers, as a Grant's By names them. Other names are
// allowed.
const (
	// ByAuto is the policy's automatic approval (--consent auto).
	ByAuto = "auto"
	// ByPrompt is a person at the interactive prompt.
	ByPrompt = "prompt"
	// ByCommand is an external consent command.
	ByCommand = "command"
	// ByPreapproved is the operator's pre-approval in the configuration.
	ByPreapproved = "preapproved"
	// ByConsole is the web console.
	ByConsole = "console"
)

// Limits on what a grant holds (PROTOCOL.md section 3 for paths).
const (
	MaxPathBytes    = 4096
	MaxSegmentBytes = 255
	// MaxServerBytes bounds a server identity.
	MaxServerBytes = 4096
	// MaxByBytes bounds a provider name (a consent command's is
	// "command:" and its program's path).
	MaxByBytes = 8192
	// maxIDBytes bounds an ID read from a file.
	maxIDBytes = 64
	// MaxRootBytes bounds a Root's directory.
	MaxRootBytes = 32 << 10
)

// Root identifies the directory a grant's mount named when consent was
// given: its canonical (absolute, symlink-resolved) path, and its device and
// inode numbers (zero on a platform without them). The zero Root is unknown.
type Root struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// RootOf returns the Root of a resolved root.
func RootOf(r roots.Root) Root { return Root{Path: r.Path, Dev: r.ID.Dev, Ino: r.ID.Ino} }

// Known reports whether r identifies a directory.
func (r Root) Known() bool { return r.Path != "" }

// Same reports whether r and o are known and the same directory: the same
// path and the same device and inode.
func (r Root) Same(o Root) bool { return r.Known() && r == o }

// validRoot checks a Root given to Grant or read from a file: an absolute,
// clean path of valid UTF-8 without control characters, at most
// MaxRootBytes.
func validRoot(r Root) error {
	switch {
	case !r.Known():
		return invalidf("no root: a grant records the root its mount names")
	case len(r.Path) > MaxRootBytes:
		return invalidf("root longer than %d bytes", MaxRootBytes)
	case !utf8.ValidString(r.Path):
		return invalidf("root %q is not valid UTF-8", r.Path)
	case !filepath.IsAbs(r.Path) || filepath.Clean(r.Path) != r.Path:
		return invalidf("root %q is not an absolute, clean path", r.Path)
	}
	for i := 0; i < len(r.Path); i++ {
		if c := r.Path[i]; c < 0x20 || c == 0x7f {
			return invalidf("root %q holds a control character", r.Path)
		}
	}
	return nil
}

// Grant is one consent grant.
type Grant struct {
	// ID names the grant, for revocation and the audit trail; the Store
	// assigns it.
	ID string `json:"id"`
	// Server is the server identity that holds the grant.
	Server string `json:"server"`
	// Access is Read or Write.
	Access Access `json:"access"`
	// Path is the mount-relative path the grant covers, with everything
	// beneath it.
	Path string `json:"path"`
	// Root is the root Path's mount named when consent was given; the
	// grant covers nothing under another. Unknown for a grant read from a
	// version 1 file.
	Root Root `json:"root,omitzero"`
	// Granted is when consent was given (UTC).
	Granted time.Time `json:"granted"`
	// Expires is the last instant the grant is live (UTC); zero: never.
	Expires time.Time `json:"expires,omitzero"`
	// By is the consent provider that approved it.
	By string `json:"by"`
}

// CoversPath reports whether the grant's path is p or an ancestor of p at a
// segment boundary. Access and expiry are not considered.
func (g Grant) CoversPath(p string) bool { return coversPath(g.Path, p) }

// Covers reports whether the grant allows access to p: its path covers p
// and its access allows access. Expiry is not considered (see Live), nor
// the root (see Root.Same).
func (g Grant) Covers(access Access, p string) bool {
	return g.Access.Allows(access) && g.CoversPath(p)
}

// Mount returns the mount the grant's path starts with.
func (g Grant) Mount() string {
	m, _, _ := strings.Cut(g.Path, "/")
	return m
}

// Live reports whether the grant is in force at now: it never expires, or
// now is not after Expires.
func (g Grant) Live(now time.Time) bool { return g.Expires.IsZero() || !now.After(g.Expires) }

// lasts reports whether g stays live at least as long as h.
func (g Grant) lasts(h Grant) bool {
	return g.Expires.IsZero() || !h.Expires.IsZero() && !g.Expires.Before(h.Expires)
}

func coversPath(grant, p string) bool {
	return p == grant || len(p) > len(grant) && p[len(grant)] == '/' && strings.HasPrefix(p, grant)
}

var (
	// ErrCorrupt is matched by the error of a grants file that is not valid:
	// it is never read as "no grants".
	ErrCorrupt = errors.New("corrupt grants file")
	// ErrInvalid is matched by the error of an invalid argument: a server
	// identity, a grant, a path or a revocation filter.
	ErrInvalid = errors.New("invalid argument")
	// ErrTooMany is matched by the error of a Grant that would give a server
	// more grants than the limit (WithMaxGrants).
	ErrTooMany = errors.New("too many grants")
	// ErrClosed is returned by a Store after Close.
	ErrClosed = errors.New("grants store is closed")
)

// Error is the error of a Store operation on one server's grants. Path is
// the server's grants file, for an operator to inspect, restore or remove.
type Error struct {
	Op     string // "covers", "list", "grant", "revoke", "watch"
	Server string // "" when the file's server is not known
	Path   string
	Err    error
}

func (e *Error) Error() string {
	if e.Server == "" {
		return fmt.Sprintf("grants: %s: %s: %v", e.Op, e.Path, e.Err)
	}
	return fmt.Sprintf("grants: %s for server %q: %s: %v", e.Op, e.Server, e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// ValidPath checks that p is a canonical mount-relative path, as the broker
// writes paths: not empty, at most MaxPathBytes, valid UTF-8 without ASCII
// control characters or backslashes, and made of "/"-separated segments
// that are not empty, "." or "..", each at most MaxSegmentBytes. The error
// matches ErrInvalid.
func ValidPath(p string) error {
	switch {
	case p == "":
		return invalidf("empty path")
	case len(p) > MaxPathBytes:
		return invalidf("path longer than %d bytes", MaxPathBytes)
	case !utf8.ValidString(p):
		return invalidf("path %q is not valid UTF-8", p)
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) {
			c := p[i]
			if c < 0x20 || c == 0x7f || c == '\\' {
				return invalidf("path %q holds a control character or a backslash", p)
			}
			if c != '/' {
				continue
			}
		}
		switch seg := p[start:i]; {
		case seg == "":
			return invalidf("path %q is not canonical: an empty segment (leading, trailing or repeated \"/\")", p)
		case seg == "." || seg == "..":
			return invalidf("path %q is not canonical: a %q segment", p, seg)
		case len(seg) > MaxSegmentBytes:
			return invalidf("path %q has a segment longer than %d bytes", p, MaxSegmentBytes)
		}
		start = i + 1
	}
	return nil
}

// validServer checks a server identity: not empty, valid UTF-8 (it is kept
// in JSON), at most MaxServerBytes.
func validServer(server string) error {
	switch {
	case server == "":
		return invalidf("empty server identity")
	case len(server) > MaxServerBytes:
		return invalidf("server identity longer than %d bytes", MaxServerBytes)
	case !utf8.ValidString(server):
		return invalidf("server identity %q is not valid UTF-8", server)
	}
	return nil
}

// validBy checks a provider name: not empty, at most MaxByBytes, printable.
func validBy(by string) error {
	if by == "" || len(by) > MaxByBytes {
		return invalidf("provider name of %d bytes: want 1 to %d bytes of UTF-8", len(by), MaxByBytes)
	}
	if !utf8.ValidString(by) {
		return invalidf("provider name %q: want 1 to %d bytes of UTF-8", by, MaxByBytes)
	}
	for i := 0; i < len(by); i++ {
		if c := by[i]; c < 0x20 || c == 0x7f {
			return invalidf("provider name %q holds a control character", by)
		}
	}
	return nil
}

// validID checks a grant ID read from a file.
func validID(id string) error {
	if id == "" || len(id) > maxIDBytes {
		return fmt.Errorf("grant id of %d bytes: want 1 to %d bytes", len(id), maxIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("grant id %q: want printable ASCII", id)
		}
	}
	return nil
}

// RevokeFilter selects the grants Revoke removes: those that match every
// selector given. At least one selector, or All alone, is required.
type RevokeFilter struct {
	// Server selects the grants of one server identity.
	Server string
	// Path selects the grants on Path and beneath it (at a segment
	// boundary). A grant on an ancestor of Path is not selected: revoking
	// "proj/dir" leaves a grant on "proj" whole, and a grant cannot be
	// narrowed by revoking a part of it; revoke the broader grant instead.
	Path string
	// ID selects the grant with this ID.
	ID string
	// All selects every grant of every server; it cannot be combined with
	// other selectors.
	All bool
}

func (f RevokeFilter) validate() error {
	selector := f.Server != "" || f.Path != "" || f.ID != ""
	switch {
	case f.All && selector:
		return invalidf("revoke: All selects every grant; it cannot be combined with Server, Path or ID")
	case !f.All && !selector:
		return invalidf("revoke: give a Server, a Path or an ID, or All for every grant")
	}
	if f.Path != "" {
		if err := ValidPath(f.Path); err != nil {
			return err
		}
	}
	return nil
}

// matches reports whether the filter selects g.
func (f RevokeFilter) matches(g Grant) bool {
	if f.All {
		return true
	}
	return (f.Server == "" || g.Server == f.Server) &&
		(f.Path == "" || coversPath(f.Path, g.Path)) &&
		(f.ID == "" || g.ID == f.ID)
}

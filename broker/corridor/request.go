// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// Caller is who sends a request: the server's identity and its session, as
// the front end knows them. It goes into the policy input, the consent
// provider's question and the audit records.
type Caller struct {
	// ID is the server's identity: the id the operator pinned, else the name
	// the server declared.
	ID string
	// Pinned is true when ID was pinned by the operator, who a server cannot
	// pretend to be.
	Pinned bool
	// Name and Version are what the server declared about itself.
	Name, Version string
	// SessionID names the session; decision ids start with it.
	SessionID string
	// ProtocolVersion is the session's negotiated protocol version.
	ProtocolVersion string
	// Transport is how the server is reached ("stdio", "child", "http",
	// "wrap").
	Transport string
	// FrontEnd and Tool name a front end other than the client role's
	// files/* session ("serve") and the tool (or resources method) the
	// request serves; they go into the policy input (input.frontEnd) and the
	// audit records (tool; and Tool as the decision and outcome records'
	// method, recordedMethod).
	FrontEnd, Tool string
}

// DeclaredPrefix starts the state key of a server whose identity is only the
// name it declared (see StateKey).
const DeclaredPrefix = "declared:"

// StateKey is what the server's grants, daily write count and rate limit are
// kept under: the pinned id as it is, and a declared name behind
// DeclaredPrefix. A server that declares the name an operator pinned for
// another one therefore never holds that one's grants, nor spends its quota.
func (c Caller) StateKey() string { return StateKeyOf(c.ID, c.Pinned) }

// StateKeyOf is the state key of the identity id, pinned by the operator or
// only declared by the server (see Caller.StateKey).
func StateKeyOf(id string, pinned bool) string {
	if pinned {
		return id
	}
	return DeclaredPrefix + id
}

// IdentityOf undoes StateKeyOf: the identity a state key is kept for, as the
// audit trail names the server, and whether the operator pinned it.
func IdentityOf(key string) (id string, pinned bool) {
	id, declared := strings.CutPrefix(key, DeclaredPrefix)
	return id, !declared
}

// Every request names its paths as the caller wrote them (docs/protocol.md
// section 3: mount-relative, absolute or file:// URI) and carries Params, the
// request's params document as the caller received it, for the policy input
// (input.params): the corridor cuts every content member out before a
// policy sees it.

// ReadRequest reads a file.
type ReadRequest struct {
	Path string
	// Offset is where to start; Length the most bytes to return, or the
	// default (DefaultReadLength, within MaxReadBytes) when negative.
	Offset, Length int64
	// UTF8 asks for text: content that is not UTF-8 is an IO_ERROR, and a
	// chunk never ends inside a character.
	UTF8   bool
	Params []byte
}

// ReadResult is what was read.
type ReadResult struct {
	Data     []byte
	Size     int64 // the whole file's size
	EOF      bool
	MimeType string
	ETag     string
}

// WriteRequest writes a file whole, or one chunk of a staged write.
type WriteRequest struct {
	Path          string
	Data          []byte
	Create        bool // the file may be created
	CreateParents bool
	IfMatch       string // the file's etag must be this
	IfNoneMatch   bool   // the file must not exist
	// Offset and Final place a chunk: offset 0 and final is a whole write;
	// otherwise chunks are staged until the final one commits them.
	Offset int64
	Final  bool
	Params []byte
}

// WriteResult is what was written; ETag and Created are set once the file is
// written (a staged chunk that is not final leaves them zero).
type WriteResult struct {
	Path    string // mount-relative
	Size    int64
	ETag    string
	Created bool
}

// ListRequest lists a directory, a page at a time.
type ListRequest struct {
	Path          string
	Recursive     bool
	IncludeHidden bool
	MaxDepth      int // -1: no limit
	Limit         int
	Cursor        string
	Params        []byte
	// TypesOnly: the caller needs each entry's path, name and type only;
	// Size and Modified are zero, and entries are not stat'ed where the
	// directory gives their types (executor.ListOptions.TypesOnly).
	TypesOnly bool
}

// ListEntry is one entry the caller may see.
type ListEntry struct {
	Path     string // mount-relative
	Name     string
	Type     string
	Size     int64
	Modified time.Time
}

// ListResult is a page of a listing.
type ListResult struct {
	Entries    []ListEntry
	NextCursor string
}

// CreateRequest creates a file or a directory.
type CreateRequest struct {
	Path      string
	Directory bool
	Parents   bool
	Params    []byte
}

// DeleteRequest deletes a file or a directory.
type DeleteRequest struct {
	Path      string
	Recursive bool
	Params    []byte
}

// RenameRequest moves a file or a directory.
type RenameRequest struct {
	OldPath, NewPath string
	Overwrite        bool
	Params           []byte
}

// RenameResult names both paths, mount-relative.
type RenameResult struct {
	OldPath, NewPath string
}

// WatchRequest watches a path for changes.
type WatchRequest struct {
	Path      string
	Recursive bool
	Events    []string
	Params    []byte
}

// Change is one change a watch reports, after the corridor decided the
// caller may see it.
type Change struct {
	WatchID string
	Path    string // mount-relative
	Event   string
	Time    time.Time
}

// ConsentRequest asks for consent to paths.
type ConsentRequest struct {
	Message string
	Paths   []string
	Access  string // "read" or "write"
	// Params are the files/consent params as sent, which the policy sees
	// (input.params: its consentable rule reads the access there); nil
	// makes them from Paths and Access, for a front end with no such
	// request of its own.
	Params []byte
	// Resolve is how the operation the consent is for resolves its paths
	// (ConsentFollow, the zero value, for files/consent), so that the
	// provider is asked about, and grants name, what it acts on.
	Resolve ConsentResolve
}

// ConsentResult is what was approved (mount-relative paths).
type ConsentResult struct {
	Granted  bool
	Approved []string
	// Removed are the requested paths never put to the provider, with why:
	// outside every root, or the policy's reasons for letting nobody grant
	// the access (as the provider was shown them). A front end tells its
	// caller why the path stays refused (fsbroker serve's tool results).
	Removed []consent.Removed
}

// RootsRequest asks which roots the caller may see.
type RootsRequest struct {
	Params []byte
}

// RootsResult holds the roots the caller may see.
type RootsResult struct {
	Roots []roots.Root
}

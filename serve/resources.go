// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// The resources methods fsbroker serve answers (docs/protocol.md section 8),
// and the notification it sends for a subscription.
const (
	MethodResourcesList         = "resources/list"
	MethodResourceTemplatesList = "resources/templates/list"
	MethodResourcesRead         = "resources/read"
	MethodResourcesSubscribe    = "resources/subscribe"
	MethodResourcesUnsubscribe  = "resources/unsubscribe"
	NotificationResourceUpdated = "notifications/resources/updated"
)

// The bounds of resources/list (docs/serve.md, Resources).
const (
	// ResourcesPerPage is the most resources one resources/list page holds.
	ResourcesPerPage = 100
	// resourcesListCalls is the most corridor listings one page makes: a
	// tree of directories with few files gives a short page (a nextCursor
	// still says where the next one starts) rather than an unbounded
	// request.
	resourcesListCalls = 8
	// MaxResources is the most resources resources/list shows over all its
	// pages: a larger tree is cut there (its last page has no nextCursor).
	MaxResources = 10000
)

// CodeResourceNotFound is MCP's JSON-RPC error code for a resource that does
// not exist (specification 2025-11-25, server/resources, Error Handling).
const CodeResourceNotFound = -32002

// resourceState is what a session keeps for the resources methods: its
// subscriptions and listens (its resources/list cursors are sealed by the session's
// stateSealer).
type resourceState struct {
	subs    subscriptions
	listens listens // subscriptions/listen of protocol 2026-07-28 (modern_listen.go)
}

// resourcesCapability is the session's resources capability in initialize:
// subscriptions when the corridor serves watches; no list_changed
// notifications (nothing watches every root for new files).
func (s *Session) resourcesCapability() map[string]any {
	return map[string]any{"subscribe": s.cfg.Corridor.Watches(), "listChanged": false}
}

// handleResources answers the resources methods. A request whose params are
// malformed, or whose uri names no file of this machine, is refused before
// the corridor and recorded (Corridor.Refuse); the others go through the
// corridor as requests of the host, with the resources method as the
// records' tool.
func (s *Session) handleResources(ctx context.Context, method string, params json.RawMessage) (any, error) {
	caller := s.caller(method)
	p, err := decodeResourceParams(method, params)
	if err != nil {
		return nil, s.refuseResource(ctx, caller, p.URI, err)
	}
	switch method {
	case MethodResourcesList:
		return s.listResources(ctx, caller, p.Cursor, params)
	case MethodResourceTemplatesList:
		if p.Cursor != "" {
			return nil, s.refuseResource(ctx, caller, "", invalidCursor())
		}
		return resourceTemplatesResult(), nil
	case MethodResourcesUnsubscribe:
		return s.unsubscribeResource(ctx, caller, p.URI)
	}
	if method == MethodResourcesRead {
		return s.readResource(ctx, caller, p.URI, params)
	}
	filePath, err := resourceFilePath(p.URI)
	if err != nil {
		return nil, s.refuseResource(ctx, caller, p.URI, err)
	}
	return s.subscribeResource(ctx, caller, p.URI, filePath, params)
}

// readResource answers resources/read of uri, whose params are params: a
// uri that names no file of this machine is refused before the corridor
// (recorded); the file is read whole through the corridor.
func (s *Session) readResource(ctx context.Context, caller corridor.Caller, uri string, params json.RawMessage) (any, error) {
	filePath, err := resourceFilePath(uri)
	if err != nil {
		return nil, s.refuseResource(ctx, caller, uri, err)
	}
	data, err := s.readWhole(ctx, caller, filePath, params)
	if err != nil {
		return nil, resourceError(err, uri)
	}
	name, _ := url.PathUnescape(filePath) // the corridor decoded it already
	return readResourceResult{Contents: []resourceContents{contentsOf(uri, name, data)}}, nil
}

// refuseResource records a resources request refused before the corridor
// and returns its JSON-RPC error.
func (s *Session) refuseResource(ctx context.Context, caller corridor.Caller, uri string, err error) error {
	return resourceError(s.cfg.Corridor.Refuse(ctx, caller, caller.Tool, uri, "", err), uri)
}

// resourceError is the JSON-RPC error of a failed resources request: a
// brokered failure keeps its section 4 number and its data (code, reason,
// decisionId, details), plus the uri asked for, except FILE_NOT_FOUND, which
// is MCP's "Resource not found" (-32002). Any other error is returned as it
// is (the connection answers it as an internal error, and logs it).
func resourceError(err error, uri string) error {
	var e *errcode.Error
	if !errors.As(err, &e) {
		return err
	}
	data := e.RPCData()
	if uri != "" {
		data["uri"] = uri
	}
	if e.Code == errcode.FileNotFound {
		return &jsonrpc.Error{Code: CodeResourceNotFound, Message: "Resource not found", Data: data}
	}
	return &jsonrpc.Error{Code: e.Code.RPC(), Message: e.Code.Message(), Data: data}
}

// resourceParams are the members of a resources request's params that the
// session reads.
type resourceParams struct {
	URI    string
	Cursor string
}

// decodeResourceParams reads the params of a resources method: an object
// (absent for the list methods) with a string uri (read, subscribe and
// unsubscribe) or an optional string cursor (the list methods). Other
// members (_meta) are left alone. A failure is INVALID_PARAMS with
// data.errors; the uri is returned when it could be read, for the record.
func decodeResourceParams(method string, params json.RawMessage) (resourceParams, error) {
	var p resourceParams
	wantsURI := method != MethodResourcesList && method != MethodResourceTemplatesList
	var members map[string]json.RawMessage
	if len(params) != 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &members); err != nil || members == nil {
			return p, invalidParam("", "params must be an object")
		}
	}
	if !wantsURI {
		if raw, ok := members["cursor"]; ok && json.Unmarshal(raw, &p.Cursor) != nil {
			return p, invalidParam("/cursor", "cursor must be a string")
		}
		return p, nil
	}
	raw, ok := members["uri"]
	if !ok {
		return p, invalidParam("/uri", "uri is required")
	}
	if json.Unmarshal(raw, &p.URI) != nil || p.URI == "" {
		return resourceParams{}, invalidParam("/uri", "uri must be a non-empty string")
	}
	return p, nil
}

// invalidParam is INVALID_PARAMS for one member of the params.
func invalidParam(pointer, message string) *errcode.Error {
	return errcode.New(errcode.InvalidParams, message).
		With("errors", []map[string]string{{"pointer": pointer, "message": message}})
}

// resourceFilePath is the path the corridor is asked about for a resource
// URI: "file://" and the URI's path, still percent-encoded, which the
// corridor decodes once and canonicalizes like any path (docs/protocol.md
// section 3: confined to the roots, ".." applied lexically and never above
// its root, links followed only inside it). The scheme is "file" in any
// case; the host empty or "localhost" in any case, or absent (file:/path).
// Any other URI names no file of this machine: FILE_NOT_FOUND, before the
// corridor. An encoded slash (%2F) is INVALID_PATH: a name never holds one,
// so it can only be meant to smuggle a separator past a check.
func resourceFilePath(uri string) (string, error) {
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok || !strings.EqualFold(scheme, "file") {
		return "", errcode.New(errcode.FileNotFound, "fsbroker serve serves file:// resources only")
	}
	var p string
	switch {
	case strings.HasPrefix(rest, "//"):
		authority, filePath, hasPath := strings.Cut(rest[2:], "/")
		if authority != "" && !strings.EqualFold(authority, "localhost") {
			return "", errcode.New(errcode.FileNotFound, "the URI names another host; fsbroker serve serves this machine's files only")
		}
		if !hasPath {
			return "", errcode.New(errcode.FileNotFound, "the file URI has no path")
		}
		p = "/" + filePath
	case strings.HasPrefix(rest, "/"):
		p = rest
	default:
		return "", errcode.New(errcode.FileNotFound, "the file URI's path is not absolute")
	}
	if strings.Contains(strings.ToLower(p), "%2f") {
		return "", errcode.New(errcode.InvalidPath, "the file URI holds an encoded slash (%2F)")
	}
	return "file://" + p, nil
}

// readResourceResult is the result of resources/read.
type readResourceResult struct {
	Contents []resourceContents `json:"contents"`
}

// resourceContents is one item of a resources/read result: text or a
// base64 blob, never both.
type resourceContents struct {
	URI      string  `json:"uri"`
	MIMEType string  `json:"mimeType"`
	Text     *string `json:"text,omitempty"`
	Blob     *string `json:"blob,omitempty"`
}

// contentsOf is what resources/read returns for data, the content of the
// file at filePath asked for as uri: a file of read_media_file's types
// (images, audio) as a blob of that type; other valid UTF-8 as text
// (text/plain); anything else as an application/octet-stream blob.
func contentsOf(uri, filePath string, data []byte) resourceContents {
	c := resourceContents{URI: uri}
	media, isMedia := mediaTypes[strings.ToLower(jsExtname(filePath))]
	switch {
	case isMedia:
		c.MIMEType = media
	case utf8.Valid(data):
		text := string(data)
		c.MIMEType, c.Text = "text/plain", &text
		return c
	default:
		c.MIMEType = "application/octet-stream"
	}
	blob := base64.StdEncoding.EncodeToString(data)
	c.Blob = &blob
	return c
}

// resourceMIMEType is the mimeType a file is listed with: its type in
// read_media_file's table, else text/plain (resources/read says
// application/octet-stream for content that is not UTF-8).
func resourceMIMEType(name string) string {
	if t, ok := mediaTypes[strings.ToLower(jsExtname(name))]; ok {
		return t
	}
	return "text/plain"
}

// resourceTemplate is one item of resources/templates/list.
type resourceTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

// resourceTemplatesResult is the result of resources/templates/list: one
// template, file:///{+path} (RFC 6570 reserved expansion: path keeps its
// slashes).
func resourceTemplatesResult() map[string]any {
	return map[string]any{"resourceTemplates": []resourceTemplate{{
		URITemplate: "file:///{+path}",
		Name:        "file",
		Title:       "A file under the allowed directories",
		Description: "A file by its absolute path without the leading slash (file:///home/user/project/README.md). " +
			"Only files inside the allowed directories can be read, under the same policy and consent as the tools.",
	}}}
}

// resource is one item of resources/list.
type resource struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MIMEType string `json:"mimeType"`
	Size     int64  `json:"size"`
}

// listResourcesResult is the result of resources/list.
type listResourcesResult struct {
	Resources  []resource `json:"resources"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// listResources answers resources/list: the regular files under the roots,
// in the roots' order and each root's listing order, as the corridor lists
// them for the host (recursively, hidden names included, what the policy
// hides left out; links and directories are not resources), a page at a
// time. The first listing of a root no grant covers asks the consent
// provider; a root the host may not list is passed over.
func (s *Session) listResources(ctx context.Context, caller corridor.Caller, cursor string, params []byte) (any, error) {
	pos, err := s.decodeResourcesCursor(caller, cursor)
	if err != nil {
		return nil, s.refuseResource(ctx, caller, "", err)
	}
	units := resourceUnits(s.roots())
	start := 0
	if pos.unit != "" {
		start = slices.Index(units, pos.unit)
		if start < 0 {
			return nil, s.refuseResource(ctx, caller, "", invalidCursor())
		}
	}
	out := listResourcesResult{Resources: make([]resource, 0, ResourcesPerPage)}
	calls := 0
	for i := start; i < len(units); i++ {
		unit, inner := units[i], ""
		if i == start {
			inner = pos.inner
		}
		for {
			room := min(ResourcesPerPage-len(out.Resources), MaxResources-pos.count-len(out.Resources))
			if room <= 0 || calls == resourcesListCalls {
				if pos.count+len(out.Resources) >= MaxResources {
					s.log.Info("resources/list stopped at its bound", "resources", MaxResources)
					return out, nil
				}
				out.NextCursor = s.encodeResourcesCursor(caller, resourcesPosition{unit: unit, inner: inner,
					count: pos.count + len(out.Resources)})
				return out, nil
			}
			calls++
			req := corridor.ListRequest{Path: unit, Recursive: true, IncludeHidden: true, MaxDepth: -1,
				Limit: room, Cursor: inner, Params: params}
			list := func() (corridor.ListResult, error) { return s.cfg.Corridor.List(ctx, caller, req) }
			var page corridor.ListResult
			if inner == "" {
				page, err = consented(ctx, s, caller, "read", []string{unit}, list)
			} else {
				page, err = list()
			}
			if c := errcode.Of(err); c == errcode.PermissionDenied || c == errcode.FileNotFound {
				s.log.Debug("resources/list passes over a root the host may not list", "path", unit, "code", c)
				break
			} else if err != nil {
				return nil, resourceError(err, "")
			}
			for _, e := range page.Entries {
				if e.Type == "file" {
					out.Resources = append(out.Resources, resource{URI: FileURL(s.hostPath(e.Path)), Name: e.Path,
						MIMEType: resourceMIMEType(e.Name), Size: e.Size})
				}
			}
			if page.NextCursor == "" {
				break
			}
			inner = page.NextCursor
		}
	}
	return out, nil
}

// resourcesPosition is where a resources/list page starts: the directory
// listed (one of resourceUnits), the corridor's cursor in its listing (""
// for its start), and how many resources the pages before showed.
type resourcesPosition struct {
	unit, inner string
	count       int
}

// resourceUnits are the directories resources/list walks, mount-relative,
// in the roots' order: each root served whole, and each subtree of a root
// the host's roots narrowed (roots.Intersect), whose own directory the host
// may not list.
func resourceUnits(set *roots.Set) []string {
	var units []string
	for _, r := range set.All() {
		subs := set.Scope(r.Mount)
		if subs == nil {
			units = append(units, r.Mount)
			continue
		}
		for _, sub := range subs {
			units = append(units, path.Join(r.Mount, sub))
		}
	}
	return units
}

// invalidCursor is the refusal of a cursor this session did not give.
func invalidCursor() *errcode.Error {
	return invalidParam("/cursor", "not a cursor this session returned")
}

// cursorBinding is what a resources/list cursor is bound to: the host (its
// identity and the session) and the method.
func cursorBinding(caller corridor.Caller) StateBinding {
	return StateBinding{Principal: principalOf(caller), Method: MethodResourcesList}
}

// encodeResourcesCursor makes the opaque cursor of pos: its count,
// directory and corridor cursor, sealed for the host by the session's
// sealer, with no expiry (sealCursor). A cursor is good for this session
// and this host only; it names no entry (the corridor's own cursor is
// sealed).
func (s *Session) encodeResourcesCursor(caller corridor.Caller, pos resourcesPosition) string {
	body := strconv.AppendInt(nil, int64(pos.count), 10)
	body = append(append(append(append(body, 0), pos.unit...), 0), pos.inner...)
	return s.sealer.sealCursor(cursorBinding(caller), body)
}

// decodeResourcesCursor opens a cursor of encodeResourcesCursor ("": the
// start); any other is INVALID_PARAMS.
func (s *Session) decodeResourcesCursor(caller corridor.Caller, cursor string) (resourcesPosition, error) {
	if cursor == "" {
		return resourcesPosition{}, nil
	}
	raw, err := s.sealer.openCursor(cursorBinding(caller), cursor)
	if err != nil {
		return resourcesPosition{}, invalidCursor()
	}
	parts := strings.SplitN(string(raw), "\x00", 3)
	count, err := strconv.Atoi(parts[0])
	if len(parts) != 3 || err != nil || parts[1] == "" || count < 0 {
		return resourcesPosition{}, invalidCursor()
	}
	return resourcesPosition{count: count, unit: parts[1], inner: parts[2]}, nil
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// The files/* methods are adapters: each decodes its params (validated
// against its schema by handleKnown), hands the corridor a typed request,
// and encodes the corridor's result as the method's result
// (docs/protocol.md section 5).

// WithExecutor enables the files/* methods, performed by x (shared by every
// session of the process).
func WithExecutor(x *executor.Executor) Option {
	return func(s *Session) { s.corridorOpts = append(s.corridorOpts, corridor.WithExecutor(x)) }
}

// WithDecider sets the decision stage. A session built without it, or with a
// nil d, refuses every request with PERMISSION_DENIED and shows no root: the
// library fails closed.
func WithDecider(d decision.Decider) Option {
	return func(s *Session) { s.corridorOpts = append(s.corridorOpts, corridor.WithDecider(d)) }
}

// WithLimits sets the session's limits (docs/protocol.md section 6); zero
// fields keep their defaults.
func WithLimits(l corridor.Limits) Option { return func(s *Session) { s.limits = l } }

// fileMethods adds the files/* methods to the table when the corridor
// performs file operations.
func (s *Session) fileMethods(m map[string]method) {
	if !s.corridor.Files() {
		return
	}
	m["files/read"] = method{audited: true, handle: s.filesRead}
	m["files/write"] = method{audited: true, handle: s.filesWrite}
	m["files/list"] = method{audited: true, handle: s.filesList}
	m["files/create"] = method{audited: true, handle: s.filesCreate}
	m["files/delete"] = method{audited: true, handle: s.filesDelete}
	m["files/rename"] = method{audited: true, handle: s.filesRename}
	m["files/consent"] = method{handle: s.filesConsent}
	if s.corridor.Watches() {
		m["files/watch"] = method{audited: true, handle: s.filesWatch}
		m["files/unwatch"] = method{handle: s.filesUnwatch}
	}
}

// decodeParams decodes validated params into v. What the schema lets through
// but Go cannot hold (an integer written 1e300) is INVALID_PARAMS.
func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return nil
	}
	if err := json.Unmarshal(params, v); err != nil {
		pointer := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			pointer = "/" + te.Field
		}
		return errcode.New(errcode.InvalidParams, "params cannot be decoded").
			With("errors", []map[string]string{{"pointer": pointer, "message": "value out of range for this field"}})
	}
	return nil
}

type readParams struct {
	Path     string `json:"path"`
	Encoding string `json:"encoding"`
	Offset   int64  `json:"offset"`
	Length   *int64 `json:"length"`
}

func (s *Session) filesRead(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	p := readParams{Encoding: "utf-8"}
	if err := decodeParams(params, &p); err != nil {
		return nil, s.refuse(ctx, caller, "files/read", params, err)
	}
	length := int64(-1) // the corridor's default
	if p.Length != nil {
		length = *p.Length
	}
	r, err := s.corridor.Read(ctx, caller, corridor.ReadRequest{Path: p.Path, Offset: p.Offset, Length: length,
		UTF8: p.Encoding == "utf-8", Params: params})
	if err != nil {
		return nil, err
	}
	return &readReply{data: r.Data, encoding: p.Encoding, size: r.Size, offset: p.Offset,
		eof: r.EOF, mimeType: r.MimeType, etag: r.ETag}, nil
}

type writeParams struct {
	Path          string `json:"path"`
	Content       string `json:"content"`
	Encoding      string `json:"encoding"`
	Create        *bool  `json:"create"`
	CreateParents bool   `json:"createParents"`
	IfMatch       string `json:"ifMatch"`
	IfNoneMatch   string `json:"ifNoneMatch"`
	Offset        int64  `json:"offset"`
	Final         *bool  `json:"final"`
}

type writeResult struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ETag    string `json:"etag"`
	Created bool   `json:"created"`
}

func (s *Session) filesWrite(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	p := writeParams{Encoding: "utf-8"}
	if err := decodeParams(params, &p); err != nil {
		return nil, s.refuse(ctx, caller, "files/write", params, err)
	}
	data := []byte(p.Content)
	if p.Encoding == "base64" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(p.Content); err != nil {
			return nil, s.refuse(ctx, caller, "files/write", params, errcode.New(errcode.InvalidParams, "content is not valid base64").
				With("errors", []map[string]string{{"pointer": "/content", "message": "not valid base64"}}))
		}
	}
	r, err := s.corridor.Write(ctx, caller, corridor.WriteRequest{Path: p.Path, Data: data,
		Create: p.Create == nil || *p.Create, CreateParents: p.CreateParents, IfMatch: p.IfMatch,
		IfNoneMatch: p.IfNoneMatch == "*", Offset: p.Offset, Final: p.Final == nil || *p.Final, Params: params})
	if err != nil {
		return nil, err
	}
	return writeResult{Path: r.Path, Size: r.Size, ETag: r.ETag, Created: r.Created}, nil
}

type listParams struct {
	Path          string `json:"path"`
	Recursive     bool   `json:"recursive"`
	IncludeHidden bool   `json:"includeHidden"`
	MaxDepth      *int   `json:"maxDepth"`
	Limit         int    `json:"limit"`
	Cursor        string `json:"cursor"`
}

// defaultListLimit is files/list's default page size.
const defaultListLimit = 1000

func (s *Session) filesList(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	p := listParams{Limit: defaultListLimit}
	if err := decodeParams(params, &p); err != nil {
		return nil, s.refuse(ctx, caller, "files/list", params, err)
	}
	maxDepth := -1
	if p.MaxDepth != nil {
		maxDepth = *p.MaxDepth
	}
	r, err := s.corridor.List(ctx, caller, corridor.ListRequest{Path: p.Path, Recursive: p.Recursive,
		IncludeHidden: p.IncludeHidden, MaxDepth: maxDepth, Limit: p.Limit, Cursor: p.Cursor, Params: params})
	if err != nil {
		return nil, err
	}
	return &listReply{entries: r.Entries, nextCursor: r.NextCursor}, nil
}

type createParams struct {
	Path    string `json:"path"`
	Type    string `json:"type"`
	Parents bool   `json:"parents"`
}

func (s *Session) filesCreate(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	var p createParams
	if err := decodeParams(params, &p); err != nil {
		return nil, s.refuse(ctx, caller, "files/create", params, err)
	}
	path, err := s.corridor.Create(ctx, caller, corridor.CreateRequest{Path: p.Path, Directory: p.Type == "directory",
		Parents: p.Parents, Params: params})
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": path, "type": p.Type, "created": true}, nil
}

type deleteParams struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

func (s *Session) filesDelete(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	var p deleteParams
	if err := decodeParams(params, &p); err != nil {
		return nil, s.refuse(ctx, caller, "files/delete", params, err)
	}
	path, err := s.corridor.Delete(ctx, caller, corridor.DeleteRequest{Path: p.Path, Recursive: p.Recursive, Params: params})
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": path, "deleted": true}, nil
}

type renameParams struct {
	OldPath   string `json:"oldPath"`
	NewPath   string `json:"newPath"`
	Overwrite bool   `json:"overwrite"`
}

func (s *Session) filesRename(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	var p renameParams
	if err := decodeParams(params, &p); err != nil {
		return nil, s.refuse(ctx, caller, "files/rename", params, err)
	}
	r, err := s.corridor.Rename(ctx, caller, corridor.RenameRequest{OldPath: p.OldPath, NewPath: p.NewPath,
		Overwrite: p.Overwrite, Params: params})
	if err != nil {
		return nil, err
	}
	return map[string]any{"oldPath": r.OldPath, "newPath": r.NewPath}, nil
}

type consentParams struct {
	Message        string   `json:"message"`
	RequestedPaths []string `json:"requestedPaths"`
	Access         string   `json:"access"`
}

type consentResult struct {
	Granted       bool     `json:"granted"`
	ApprovedPaths []string `json:"approvedPaths"`
}

// filesConsent answers files/consent (corridor.Consent).
func (s *Session) filesConsent(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	p := consentParams{Access: "read"}
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	r, err := s.corridor.Consent(ctx, caller, corridor.ConsentRequest{Message: p.Message, Paths: p.RequestedPaths,
		Access: p.Access, Params: params})
	if err != nil {
		return nil, err
	}
	return consentResult{Granted: r.Granted, ApprovedPaths: r.Approved}, nil
}

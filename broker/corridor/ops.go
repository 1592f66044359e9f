// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"fmt"
	"time"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// readAttempts bounds how often a read that raced a replace of its file
// (another writer's atomic rename) is resolved and decided again: the reader
// gets the old or the new file, whole (docs/protocol.md section 5,
// files/read).
const readAttempts = 16

// resolveOne is the canonicalize step of a request with one path.
func (c *Corridor) resolveOne(ctx context.Context, method, op, raw string, follow bool, bytes int64, params []byte) (requests, error) {
	t, err := c.canonicalize(ctx, raw, follow)
	if err != nil {
		return requests{}, err
	}
	return oneRequest(request{method: method, operation: op, path: t, requested: raw, bytes: bytes, params: params}), nil
}

// Read reads a file for caller.
func (c *Corridor) Read(ctx context.Context, caller Caller, r ReadRequest) (ReadResult, error) {
	if r.Length < 0 {
		r.Length = min(int64(DefaultReadLength), c.limits.MaxReadBytes)
	}
	return run(ctx, c, caller, &readOp, r)
}

// readOp is files/read; its request's Length is set (Read).
var readOp = operation[ReadRequest, ReadResult]{
	method: "files/read",
	named:  func(r ReadRequest) [2]string { return [2]string{r.Path, ""} },
	checkLimits: func(c *Corridor, r ReadRequest) error {
		if r.Length > c.limits.MaxReadBytes {
			return errcode.New(errcode.QuotaExceeded,
				fmt.Sprintf("length %d is over the read limit of %d bytes", r.Length, c.limits.MaxReadBytes))
		}
		return nil
	},
	canonicalize: func(ctx context.Context, c *Corridor, r ReadRequest) (requests, error) {
		t, err := c.canonicalizeFor(ctx, r.Path, true, true)
		if err != nil {
			return requests{}, err
		}
		return oneRequest(request{method: "files/read", operation: decision.OpRead, path: t, requested: r.Path, bytes: r.Length, params: r.Params}), nil
	},
	execute: func(ctx context.Context, c *Corridor, cl *call, r ReadRequest, reqs requests) (ReadResult, error) {
		res, err := c.exec.Read(ctx, reqs.all[0].path, executor.ReadOptions{Offset: r.Offset, Length: r.Length, UTF8: r.UTF8})
		if err != nil {
			return ReadResult{}, err
		}
		cl.bytes += int64(len(res.Data))
		return ReadResult{Data: res.Data, Size: res.Size, EOF: res.EOF, MimeType: res.MimeType, ETag: res.ETag}, nil
	},
	attempts: readAttempts,
}

// Write writes a file, or a chunk of a staged write, for caller.
func (c *Corridor) Write(ctx context.Context, caller Caller, r WriteRequest) (WriteResult, error) {
	return run(ctx, c, caller, &writeOp, r)
}

// writeOp is files/write.
var writeOp = operation[WriteRequest, WriteResult]{
	method: "files/write",
	named:  func(r WriteRequest) [2]string { return [2]string{r.Path, ""} },
	checkLimits: func(c *Corridor, r WriteRequest) error {
		if n := int64(len(r.Data)); n > c.limits.MaxWriteBytes {
			return errcode.New(errcode.QuotaExceeded,
				fmt.Sprintf("%d bytes is over the write limit of %d bytes per request", n, c.limits.MaxWriteBytes))
		}
		return nil
	},
	canonicalize: func(ctx context.Context, c *Corridor, r WriteRequest) (requests, error) {
		return c.resolveOne(ctx, "files/write", decision.OpWrite, r.Path, true, int64(len(r.Data)), r.Params)
	},
	execute: func(ctx context.Context, c *Corridor, cl *call, r WriteRequest, reqs requests) (WriteResult, error) {
		t, n := reqs.all[0].path, int64(len(r.Data))
		opts := executor.WriteOptions{Create: r.Create, CreateParents: r.CreateParents, IfMatch: r.IfMatch, IfNoneMatch: r.IfNoneMatch}
		var (
			res executor.WriteResult
			err error
		)
		if r.Offset == 0 && r.Final {
			c.staged.abort(t.Path) // a whole write replaces any staged one
			res, err = c.exec.Write(ctx, t, r.Data, opts)
		} else {
			var done bool
			res, done, err = c.staged.write(ctx, c.exec, t, r.Data, r.Offset, r.Final, opts)
			if err == nil && !done {
				cl.bytes += n
				c.addWritten(cl.caller, time.Now(), n)
				return WriteResult{Path: t.Path.MountPath(), Size: res.Size}, nil
			}
		}
		if err != nil {
			return WriteResult{}, err
		}
		cl.bytes += n
		c.addWritten(cl.caller, time.Now(), n)
		return WriteResult{Path: res.Path.MountPath(), Size: res.Size, ETag: res.ETag, Created: res.Created}, nil
	},
}

// List lists a page of a directory for caller: only the entries it may see.
func (c *Corridor) List(ctx context.Context, caller Caller, r ListRequest) (ListResult, error) {
	return run(ctx, c, caller, &listOp, r)
}

// listOp is files/list.
var listOp = operation[ListRequest, ListResult]{
	method: "files/list",
	named:  func(r ListRequest) [2]string { return [2]string{r.Path, ""} },
	canonicalize: func(ctx context.Context, c *Corridor, r ListRequest) (requests, error) {
		return c.resolveOne(ctx, "files/list", decision.OpList, r.Path, true, 0, r.Params)
	},
	execute: func(ctx context.Context, c *Corridor, cl *call, r ListRequest, reqs requests) (ListResult, error) {
		req := reqs.all[0]
		page, err := c.exec.List(ctx, req.path, executor.ListOptions{Recursive: r.Recursive,
			IncludeHidden: r.IncludeHidden, MaxDepth: r.MaxDepth, Limit: r.Limit, Cursor: r.Cursor, TypesOnly: r.TypesOnly})
		if err != nil {
			return ListResult{}, err
		}
		entries := c.reportable(ctx, cl.caller, req, page.Entries)
		batch := entryInputPaths(entries)
		visible := c.visible(ctx, cl.caller, req, batch)
		out := ListResult{Entries: make([]ListEntry, 0, len(entries)), NextCursor: page.NextCursor}
		for i, e := range entries {
			mp := batch[i].MountPath
			if !visible[mp] {
				continue // hidden entries never leave the broker
			}
			out.Entries = append(out.Entries, ListEntry{Path: mp, Name: e.Name, Type: e.Type, Size: e.Size, Modified: e.Modified})
		}
		return out, nil
	},
}

// Create creates a file or a directory for caller, and returns its path,
// mount-relative.
func (c *Corridor) Create(ctx context.Context, caller Caller, r CreateRequest) (string, error) {
	return run(ctx, c, caller, &createOp, r)
}

// createOp is files/create.
var createOp = operation[CreateRequest, string]{
	method: "files/create",
	named:  func(r CreateRequest) [2]string { return [2]string{r.Path, ""} },
	canonicalize: func(ctx context.Context, c *Corridor, r CreateRequest) (requests, error) {
		return c.resolveOne(ctx, "files/create", decision.OpCreate, r.Path, false, 0, r.Params)
	},
	execute: func(ctx context.Context, c *Corridor, _ *call, r CreateRequest, reqs requests) (string, error) {
		t := reqs.all[0].path
		if err := c.exec.Create(ctx, t, r.Directory, r.Parents); err != nil {
			return "", err
		}
		return t.Path.MountPath(), nil
	},
}

// Delete deletes a file or a directory for caller, and returns its path,
// mount-relative.
func (c *Corridor) Delete(ctx context.Context, caller Caller, r DeleteRequest) (string, error) {
	return run(ctx, c, caller, &deleteOp, r)
}

// deleteOp is files/delete.
var deleteOp = operation[DeleteRequest, string]{
	method: "files/delete",
	named:  func(r DeleteRequest) [2]string { return [2]string{r.Path, ""} },
	canonicalize: func(ctx context.Context, c *Corridor, r DeleteRequest) (requests, error) {
		return c.resolveOne(ctx, "files/delete", decision.OpDelete, r.Path, false, 0, r.Params)
	},
	execute: func(ctx context.Context, c *Corridor, cl *call, r DeleteRequest, reqs requests) (string, error) {
		t := reqs.all[0].path
		checked, err := c.guardSubtree(ctx, cl, t, reqs.all[0])
		if err != nil {
			return "", err
		}
		// A recursive delete removes the entries decided on, and only those.
		if err := c.exec.Delete(ctx, t, r.Recursive, checked); err != nil {
			return "", err
		}
		return t.Path.MountPath(), nil
	},
}

// Rename moves a file or a directory for caller. Both paths are decided on:
// the source as a rename, the target as a write.
func (c *Corridor) Rename(ctx context.Context, caller Caller, r RenameRequest) (RenameResult, error) {
	return run(ctx, c, caller, &renameOp, r)
}

// renameOp is files/rename.
var renameOp = operation[RenameRequest, RenameResult]{
	method: "files/rename",
	// A refusal record names the target only, as the params' newPath (the
	// source is the params' oldPath).
	named: func(r RenameRequest) [2]string { return [2]string{"", r.NewPath} },
	canonicalize: func(ctx context.Context, c *Corridor, r RenameRequest) (requests, error) {
		from, err := c.canonicalize(ctx, r.OldPath, false)
		if err != nil {
			return requests{}, err
		}
		to, err := c.canonicalize(ctx, r.NewPath, false)
		if err != nil {
			return requests{}, err
		}
		return requests{n: 2, all: [2]request{
			{method: "files/rename", operation: decision.OpRename, path: from, requested: r.OldPath,
				newPath: &to, newRequested: r.NewPath, params: r.Params},
			{method: "files/rename", operation: decision.OpWrite, path: to, requested: r.NewPath, params: r.Params},
		}}, nil
	},
	execute: func(ctx context.Context, c *Corridor, cl *call, r RenameRequest, reqs requests) (RenameResult, error) {
		from, to := reqs.all[0].path, reqs.all[1].path
		for _, req := range reqs.list() {
			if _, err := c.guardSubtree(ctx, cl, req.path, req); err != nil {
				return RenameResult{}, err
			}
		}
		if err := c.exec.Rename(ctx, from, to, r.Overwrite); err != nil {
			return RenameResult{}, err
		}
		return RenameResult{OldPath: from.Path.MountPath(), NewPath: to.Path.MountPath()}, nil
	},
}

// Roots returns the current roots that the policy lets caller see
// (roots/list).
func (c *Corridor) Roots(ctx context.Context, caller Caller, r RootsRequest) (RootsResult, error) {
	return run(ctx, c, caller, &rootsOp, r)
}

// rootsOp is roots/list.
var rootsOp = operation[RootsRequest, RootsResult]{
	method: methodRootsList,
	named:  func(RootsRequest) [2]string { return [2]string{} },
	canonicalize: func(_ context.Context, _ *Corridor, r RootsRequest) (requests, error) {
		return oneRequest(request{method: methodRootsList, operation: decision.OpList, params: r.Params}), nil
	},
	execute: func(ctx context.Context, c *Corridor, cl *call, _ RootsRequest, reqs requests) (RootsResult, error) {
		all := c.rootsOf(ctx).All()
		batch := make([]decision.InputPath, 0, len(all))
		for _, rt := range all {
			batch = append(batch, decision.InputPath{Requested: rt.Mount, Canonical: rt.Path, Root: rt.Path, Mount: rt.Mount,
				MountPath: rt.Mount, Writable: rt.Writable, Exists: true, Type: "directory"})
		}
		visible, err := c.decider.Visible(ctx, c.policyInput(ctx, cl.caller, reqs.all[0]), batch)
		if err != nil {
			visible = nil // nothing is shown when visibility cannot be decided
		}
		out := RootsResult{Roots: make([]roots.Root, 0, len(all))}
		for _, rt := range all {
			if visible[rt.Mount] {
				out.Roots = append(out.Roots, rt)
			}
		}
		return out, nil
	},
}

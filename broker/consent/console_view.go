// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import "time"

// QueuedView is a queued request as the console shows it: every string the
// server chose made safe to show as the prompt shows it (names and versions
// quoted with what is not plainly visible escaped, paths escaped when they
// hold such characters, the message stripped of control and format
// characters and cut to 20 lines and 1000 characters, the removed paths and
// their reasons cut). The page escapes it for HTML on top.
type QueuedView struct {
	// ID names the request, for the answer.
	ID string
	// ServerID is the identity grants are kept under, quoted.
	ServerID string
	// Name and Version are what the server declared, quoted.
	Name, Version string
	// Pinned says the operator pinned the identity; otherwise it is only
	// what the server says it is.
	Pinned bool
	// Write is true for write access (read, create, change and delete).
	Write bool
	// Paths are the paths asked about.
	Paths []ViewPath
	// Removed are the requested paths that are not asked about, and why
	// (at most 20); RemovedMore counts the others.
	Removed     []ViewRemoved
	RemovedMore int
	// Message is the server's message, line by line; MessageCut says it was
	// cut.
	Message    []string
	MessageCut bool
	// PID is the waiting broker process.
	PID int
	// Created and Deadline are when the question was asked and when the
	// broker stops waiting.
	Created, Deadline time.Time
}

// ViewPath is a path asked about.
type ViewPath struct {
	// Value is the path as the request names it: what an answer approves.
	Value string
	// Shown is the path as it is shown.
	Shown string
	// HasRoot says the request described the path's root: RootName
	// (quoted), RootDir and Writable.
	HasRoot  bool
	RootName string
	RootDir  string
	Writable bool
}

// ViewRemoved is a requested path left out, and why.
type ViewRemoved struct {
	Path, Reason string
}

// View returns the request as the console shows it.
func (r QueuedRequest) View() QueuedView {
	req := r.Request
	v := QueuedView{ID: r.ID, ServerID: quoted(req.Server.ID), Name: quoted(req.Server.Name), Version: quoted(req.Server.Version),
		Pinned: req.Server.Pinned, Write: req.Access == AccessWrite, PID: r.PID, Created: r.Created, Deadline: r.Deadline}
	for _, p := range req.Paths {
		vp := ViewPath{Value: p, Shown: showPath(p)}
		if root, ok := req.rootOf(p); ok {
			vp.HasRoot, vp.RootName, vp.RootDir, vp.Writable = true, quoted(root.Name), showPath(root.Path), root.Writable
		}
		v.Paths = append(v.Paths, vp)
	}
	for i, rm := range req.Removed {
		if i == maxRemovedShown {
			v.RemovedMore = len(req.Removed) - i
			break
		}
		v.Removed = append(v.Removed, ViewRemoved{Path: showPath(cutRunes(rm.Path, maxRemovedPathRunes)), Reason: oneLine(rm.Reason, 200)})
	}
	v.Message, v.MessageCut = messageLines(req.Message)
	return v
}

// ShowUntrusted shows a short string someone else chose (a server name, a
// path, a reason in the audit trail) as the prompt shows paths: as it is
// when every character is plainly visible, else quoted with the others
// escaped, so that control and format characters (bidirectional overrides)
// cannot make it read as something else.
func ShowUntrusted(s string) string { return showPath(s) }

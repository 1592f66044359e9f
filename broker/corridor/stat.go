// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"io/fs"
	"time"

	"github.com/fsbroker/fsbroker/broker/decision"
)

// StatRequest asks for a path's metadata (fsbroker serve's get_file_info).
// It is decided as a read of the path: metadata is what a read would
// disclose first, and the default policies' rules on reads (secrets, hard
// links, grants) apply to it unchanged.
type StatRequest struct {
	Path   string
	Params []byte
}

// StatResult is what a path is, as the executor found it: the object the
// decision was made on (links inside the root followed).
type StatResult struct {
	Path     string // mount-relative
	Type     string // file, directory, symlink or other
	Size     int64
	Mode     fs.FileMode
	Modified time.Time
	// Accessed and Born are zero where the platform or the file system
	// does not report them.
	Accessed time.Time
	Born     time.Time
}

// Stat describes a path for caller: canonicalized, consent and the policy
// decided on it as on a read, the decision recorded, then the executor's
// Stat of the object decided on, and the outcome recorded. Nothing is
// opened for reading.
func (c *Corridor) Stat(ctx context.Context, caller Caller, r StatRequest) (StatResult, error) {
	return run(ctx, c, caller, &statOp, r)
}

// statOp is a stat, decided as a files/read (the method the policy input
// knows) of no bytes; its audit records name the front end's tool as their
// method and tool (recordedMethod).
var statOp = operation[StatRequest, StatResult]{
	method: "files/read",
	named:  func(r StatRequest) [2]string { return [2]string{r.Path, ""} },
	canonicalize: func(ctx context.Context, c *Corridor, r StatRequest) (requests, error) {
		return c.resolveOne(ctx, "files/read", decision.OpRead, r.Path, true, 0, r.Params)
	},
	execute: func(ctx context.Context, c *Corridor, _ *call, _ StatRequest, reqs requests) (StatResult, error) {
		t := reqs.all[0].path
		res, err := c.exec.Stat(ctx, t)
		if err != nil {
			return StatResult{}, err
		}
		return StatResult{Path: t.Path.MountPath(), Type: res.Type, Size: res.Size, Mode: res.Mode,
			Modified: res.ModTime, Accessed: res.Accessed, Born: res.Born}, nil
	},
	// A stat that raced a replace of its path is resolved and decided again,
	// as a read is.
	attempts: readAttempts,
}

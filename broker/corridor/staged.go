// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// stageTable holds a session's staged (chunked) writes, one per canonical
// path. A staged write is discarded when it sees no chunk for the idle time,
// when a new first chunk of its path replaces it, and at session end.
//
// Every stage holds a temporary file from the moment it starts until it is
// committed or aborted. The table bounds those files, not only its entries:
// a place (held) is taken before a stage starts and given back only once the
// stage has ended, so a burst of concurrent first chunks, a stage being
// replaced or one committing never take the count past MaxStagedWrites.
// Whoever takes a stage out of the table (a replacement, the final chunk,
// expiry, a whole write, the session's end) ends it and gives its place back;
// a stage that cannot be put in because the session has ended is aborted by
// its starter.
type stageTable struct {
	idle time.Duration

	mu     sync.Mutex
	stages map[canon.Path]*stagedWrite
	held   int // places taken: stages starting, staged, committing or being aborted
	timer  *time.Timer
	closed bool

	// beforeInstall, when set (by tests), runs after a first chunk's stage
	// was made and before it is put in the table.
	beforeInstall func()
}

type stagedWrite struct {
	stage    *executor.Stage
	opts     executor.WriteOptions // the first chunk's conditions, checked again at commit
	lastUsed time.Time
}

func newStageTable(idle time.Duration) *stageTable {
	return &stageTable{idle: idle, stages: make(map[canon.Path]*stagedWrite)}
}

// MaxStagedWrites bounds the staged writes of one session: each holds open
// files and a temporary file until it commits or ends (QUOTA_EXCEEDED past
// it).
const MaxStagedWrites = 16

// write handles a chunk that is not a whole write: offset 0 starts a staged
// write (replacing any staged one for the path); a later chunk must continue
// one at exactly the bytes staged so far; the final chunk commits it. done is
// true once committed.
func (st *stageTable) write(ctx context.Context, x *executor.Executor, t executor.Target, data []byte,
	offset int64, final bool, opts executor.WriteOptions) (r executor.WriteResult, done bool, err error) {
	var sw *stagedWrite
	if offset == 0 {
		sw, err = st.start(ctx, x, t, data, opts)
	} else {
		sw, err = st.appendTo(t.Path, data, offset)
	}
	if err != nil {
		return executor.WriteResult{}, false, err
	}
	if !final {
		return executor.WriteResult{Path: t.Path, Size: offset + int64(len(data))}, false, nil
	}
	if !st.take(t.Path, sw) {
		// Replaced, expired or ended by the session while this chunk was
		// appended: whoever took it out ends it.
		return executor.WriteResult{}, false, errcode.New(errcode.ConcurrencyConflict,
			"the staged write was replaced or discarded before its final chunk")
	}
	defer st.release()
	r, err = sw.stage.Commit(ctx, sw.opts)
	return r, err == nil, err
}

// start begins a staged write of t.Path with its first chunk, replacing the
// staged write of the path, if any. The new stage is put in the table only
// once it holds its first chunk, so a concurrent chunk never sees it half
// made.
func (st *stageTable) start(ctx context.Context, x *executor.Executor, t executor.Target, data []byte,
	opts executor.WriteOptions) (*stagedWrite, error) {
	old, err := st.reserve(t.Path)
	if err != nil {
		return nil, err
	}
	if old != nil {
		old.stage.Abort() // its place is now this stage's
	}
	stage, err := x.StartStage(ctx, t, opts)
	if err != nil {
		st.release()
		return nil, err
	}
	sw := &stagedWrite{stage: stage, opts: opts}
	if err := stage.Append(data, 0); err != nil {
		st.end(sw)
		return nil, err
	}
	sw.lastUsed = time.Now()
	if st.beforeInstall != nil {
		st.beforeInstall()
	}
	displaced, err := st.install(t.Path, sw)
	if err != nil {
		st.end(sw) // the session ended while the stage started
		return nil, err
	}
	if displaced != nil {
		st.end(displaced) // a first chunk of the same path that started at the same time
	}
	return sw, nil
}

// reserve takes a place for a new stage of p. A staged write of p is taken
// out of the table and returned: its place passes to the new stage, and the
// caller aborts it. Otherwise a free place is taken, or QUOTA_EXCEEDED.
func (st *stageTable) reserve(p canon.Path) (*stagedWrite, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, errSessionEnding()
	}
	if old := st.stages[p]; old != nil {
		delete(st.stages, p)
		return old, nil
	}
	if st.held >= MaxStagedWrites {
		return nil, errcode.New(errcode.QuotaExceeded,
			fmt.Sprintf("the session already has %d staged writes (started or staged), the limit", MaxStagedWrites))
	}
	st.held++
	return nil, nil
}

// install puts sw in the table as p's staged write. It returns the stage it
// displaced (the caller aborts it and gives its place back), or an error once
// the session has ended (the caller aborts sw and gives its place back).
func (st *stageTable) install(p canon.Path, sw *stagedWrite) (displaced *stagedWrite, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, errSessionEnding()
	}
	displaced = st.stages[p]
	st.stages[p] = sw
	if st.timer == nil {
		st.timer = time.AfterFunc(st.idle, st.expire)
	}
	return displaced, nil
}

func errSessionEnding() error {
	return errcode.New(errcode.IOError, "the session is ending")
}

// end aborts a stage taken out of the table (or never put in), removing its
// temporary file, and gives its place back.
func (st *stageTable) end(sw *stagedWrite) {
	sw.stage.Abort()
	st.release()
}

// release gives back the place of a stage that has ended.
func (st *stageTable) release() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.held--
}

// appendTo adds a chunk to p's staged write.
func (st *stageTable) appendTo(p canon.Path, data []byte, offset int64) (*stagedWrite, error) {
	st.mu.Lock()
	sw := st.stages[p]
	if sw != nil {
		sw.lastUsed = time.Now()
	}
	st.mu.Unlock()
	if sw == nil {
		return nil, errcode.New(errcode.ConcurrencyConflict,
			fmt.Sprintf("offset %d does not follow a staged write: none is in progress for this path (start at offset 0)", offset)).
			With("staged", 0)
	}
	if err := sw.stage.Append(data, offset); err != nil {
		return nil, err
	}
	return sw, nil
}

// take removes sw from the table if it is still p's staged write, and
// reports whether it was: the caller then ends it and releases its place.
func (st *stageTable) take(p canon.Path, sw *stagedWrite) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stages[p] != sw {
		return false
	}
	delete(st.stages, p)
	return true
}

// abort discards the staged write of p, if any.
func (st *stageTable) abort(p canon.Path) {
	st.mu.Lock()
	sw := st.stages[p]
	delete(st.stages, p)
	st.mu.Unlock()
	if sw != nil {
		st.end(sw)
	}
}

// expire discards the stages idle for too long and re-arms the timer while
// any remain.
func (st *stageTable) expire() {
	now := time.Now()
	var stale []*stagedWrite
	st.mu.Lock()
	next := st.idle
	for p, sw := range st.stages {
		if idle := now.Sub(sw.lastUsed); idle >= st.idle {
			stale = append(stale, sw)
			delete(st.stages, p)
		} else if left := st.idle - idle; left < next {
			next = left
		}
	}
	if len(st.stages) > 0 && !st.closed {
		st.timer = time.AfterFunc(next, st.expire)
	} else {
		st.timer = nil
	}
	st.mu.Unlock()
	for _, sw := range stale {
		st.end(sw)
	}
}

// close discards every staged write; later chunks are refused, and a stage
// still starting is aborted by its starter.
func (st *stageTable) close() {
	st.mu.Lock()
	st.closed = true
	stages := st.stages
	st.stages = map[canon.Path]*stagedWrite{}
	if st.timer != nil {
		st.timer.Stop()
	}
	st.mu.Unlock()
	for _, sw := range stages {
		st.end(sw)
	}
}

// len returns the number of staged writes.
func (st *stageTable) len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.stages)
}

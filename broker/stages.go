package broker

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
// and at session end.
type stageTable struct {
	idle time.Duration

	mu     sync.Mutex
	stages map[canon.Path]*stagedWrite
	timer  *time.Timer
	closed bool
}

type stagedWrite struct {
	stage    *executor.Stage
	opts     executor.WriteOptions // the first chunk's conditions, checked again at commit
	lastUsed time.Time
}

func newStageTable(idle time.Duration) *stageTable {
	return &stageTable{idle: idle, stages: make(map[canon.Path]*stagedWrite)}
}

// write handles a chunk that is not a whole write: offset 0 with final false
// starts a staged write (replacing any staged one for the path); a later
// chunk must continue one at exactly the bytes staged so far; the final
// chunk commits it. done is true once committed.
func (st *stageTable) write(ctx context.Context, x *executor.Executor, t executor.Target, data []byte,
	offset int64, final bool, opts executor.WriteOptions) (r executor.WriteResult, done bool, err error) {
	if offset == 0 {
		st.abort(t.Path)
		stage, err := x.StartStage(ctx, t, opts)
		if err != nil {
			return executor.WriteResult{}, false, err
		}
		if err := st.put(t.Path, &stagedWrite{stage: stage, opts: opts, lastUsed: time.Now()}); err != nil {
			stage.Abort()
			return executor.WriteResult{}, false, err
		}
	}
	sw := st.get(t.Path)
	if sw == nil {
		return executor.WriteResult{}, false, errcode.New(errcode.ConcurrencyConflict,
			fmt.Sprintf("offset %d does not follow a staged write: none is in progress for this path (start at offset 0)", offset)).
			With("staged", 0)
	}
	if err := sw.stage.Append(data, offset); err != nil {
		return executor.WriteResult{}, false, err
	}
	if !final {
		return executor.WriteResult{Path: t.Path, Size: sw.stage.Size()}, false, nil
	}
	st.remove(t.Path, sw)
	r, err = sw.stage.Commit(ctx, sw.opts)
	return r, err == nil, err
}

// maxStagedWrites bounds the staged writes of one session: each holds open
// files and a temporary file until it commits or expires.
const maxStagedWrites = 16

func (st *stageTable) put(p canon.Path, sw *stagedWrite) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return errcode.New(errcode.IOError, "the session is ending")
	}
	if len(st.stages) >= maxStagedWrites {
		return errcode.New(errcode.QuotaExceeded, fmt.Sprintf("the session already has %d staged writes, the limit", maxStagedWrites))
	}
	st.stages[p] = sw
	if st.timer == nil {
		st.timer = time.AfterFunc(st.idle, st.expire)
	}
	return nil
}

func (st *stageTable) get(p canon.Path) *stagedWrite {
	st.mu.Lock()
	defer st.mu.Unlock()
	sw := st.stages[p]
	if sw != nil {
		sw.lastUsed = time.Now()
	}
	return sw
}

func (st *stageTable) remove(p canon.Path, sw *stagedWrite) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stages[p] == sw {
		delete(st.stages, p)
	}
}

// abort discards the staged write of p, if any.
func (st *stageTable) abort(p canon.Path) {
	st.mu.Lock()
	sw := st.stages[p]
	delete(st.stages, p)
	st.mu.Unlock()
	if sw != nil {
		sw.stage.Abort()
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
		sw.stage.Abort()
	}
}

// close discards every staged write; later chunks are refused.
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
		sw.stage.Abort()
	}
}

// len returns the number of staged writes (for tests).
func (st *stageTable) len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.stages)
}

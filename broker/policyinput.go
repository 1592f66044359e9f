package broker

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/usage"
)

// NewInputPath describes a resolved target for the policy.
func NewInputPath(requested string, t executor.Target) InputPath {
	p := InputPath{
		Requested: requested,
		Canonical: canonicalPath(t),
		Root:      t.Path.Root.Path,
		Mount:     t.Path.Root.Mount,
		Relative:  t.Path.Rel,
		MountPath: t.Path.MountPath(),
		Writable:  t.Path.Root.Writable,
		Exists:    t.Exists,
		Hidden:    isHidden(t.Path.Rel),
	}
	if t.Exists {
		p.Type, p.Size, p.Nlink = t.Info.Type, max(t.Info.Size, 0), t.Info.Nlink
	}
	return p
}

// canonicalPath is the absolute canonical path of a resolved target.
func canonicalPath(t executor.Target) string {
	return string(appendCanonical(make([]byte, 0, canonicalLen(t.Path)), t.Path))
}

// isHidden reports whether any segment of a clean relative path starts with
// a dot (found without splitting the path: every listed entry is asked).
func isHidden(rel string) bool {
	return strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.")
}

// paramsWithoutContent returns a request's params for the policy input: the
// JSON object as sent, except that file content never reaches the policy (or
// anything it logs): every "content" member is cut out by scanning, never
// decoded. It is nil (no params member) when raw is absent, not an object,
// or has no other member.
func paramsWithoutContent(raw json.RawMessage) json.RawMessage {
	rest, ok := withoutMember(raw, "content")
	if !ok || len(rest) <= 2 { // "{}"
		return nil
	}
	return rest
}

// policyInput builds the policy input of a request from the session's state:
// input.grants holds the server's grants and its pre-approved roots
// (inputGrants).
func (s *Session) policyInput(req Request) *PolicyInput {
	info := s.Server()
	id, pinned := s.serverID()
	in := &PolicyInput{
		Version:   1,
		Method:    req.Method,
		Operation: req.Operation,
		Server:    InputServer{ID: id, Name: info.Name, Version: info.Version, Pinned: pinned},
		Session:   InputSession{ID: s.id, ProtocolVersion: info.ProtocolVersion, Transport: s.transport},
		Params:    paramsWithoutContent(req.Params),
		Bytes:     req.Bytes,
		Grants:    s.inputGrants(req, time.Now()),
		Usage:     InputUsage{BytesWrittenToday: s.writtenToday(time.Now()), Watches: s.watches.count()},
		Time:      NewInputTime(time.Now()),
	}
	if req.Method != "roots/list" {
		p := NewInputPath(req.Requested, req.Path)
		in.Path = &p
	}
	if req.NewPath != nil {
		p := NewInputPath(req.NewRequested, *req.NewPath)
		in.NewPath = &p
	}
	return in
}

// WithUsage keeps the bytes each server writes per UTC day in a store shared
// by every session and broker process on the state directory (so the daily
// quota survives reconnects and restarts), instead of per session in memory.
func WithUsage(st *usage.Store) Option { return func(s *Session) { s.usage = st } }

// writtenToday is what the server wrote today: from the shared store when
// there is one (a store that cannot be read makes a write fail closed in
// checkUsage; other requests go on with the session's own count), else the
// session's count.
func (s *Session) writtenToday(now time.Time) int64 {
	if s.usage != nil {
		if n, err := s.usage.Today(s.StateKey(), now); err == nil {
			return max(n, s.bytesWritten.today(now))
		}
	}
	return s.bytesWritten.today(now)
}

// checkUsage refuses a write when the shared usage store cannot be read: the
// daily quota could not be enforced.
func (s *Session) checkUsage(now time.Time) error {
	if s.usage == nil {
		return nil
	}
	if _, err := s.usage.Today(s.StateKey(), now); err != nil {
		s.log.Error("cannot read the server's usage; refusing the write", "error", err)
		return errcode.Wrap(errcode.IOError, "the daily write quota cannot be checked", err)
	}
	return nil
}

// addWritten counts n bytes written by the server now.
func (s *Session) addWritten(now time.Time, n int64) {
	s.bytesWritten.add(now, n)
	if s.usage != nil {
		if _, err := s.usage.Add(s.StateKey(), now, n); err != nil {
			s.log.Error("cannot record the server's usage", "bytes", n, "error", err)
		}
	}
}

// dailyCounter counts bytes for the current UTC day; it starts again at
// midnight. (It is this session's count: usage shared across sessions and
// restarts comes with the state directory's quotas.)
type dailyCounter struct {
	mu  sync.Mutex
	day string
	n   int64
}

func (c *dailyCounter) add(now time.Time, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roll(now)
	c.n += n
}

func (c *dailyCounter) today(now time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roll(now)
	return c.n
}

func (c *dailyCounter) roll(now time.Time) {
	if d := now.UTC().Format(time.DateOnly); d != c.day {
		c.day, c.n = d, 0
	}
}

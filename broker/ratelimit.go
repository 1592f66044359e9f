// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// Rate limit defaults (docs/protocol.md section 6).
const (
	DefaultRate              = 200 // requests per second per server
	DefaultBurst             = 400
	DefaultMaxInFlightServer = 64 // requests of one server being handled at once
)

// refusalRecordInterval bounds the audit records of rate-limit refusals: at
// most one per server per interval, carrying the count of those suppressed.
const refusalRecordInterval = time.Second

// Limiter holds the per-server request limits of one broker process: a token
// bucket (golang.org/x/time/rate) and a cap on requests in flight, per server
// identity, shared by every session of that server. ping is never limited.
type Limiter struct {
	rate        rate.Limit
	burst       int
	maxInFlight int
	clock       func() time.Time // read under mu, so the buckets see time in order

	mu      sync.Mutex
	servers map[string]*serverLimit
}

// serverLimit is one server's state.
type serverLimit struct {
	bucket   *rate.Limiter
	inFlight int
	// Refusals not written to the audit trail since the last one that was.
	suppressed   int
	lastRecorded time.Time
}

// NewLimiter returns a Limiter: perSecond requests per second with bursts of
// burst, and at most maxInFlight requests handled at once, per server.
// perSecond <= 0 disables the rate; maxInFlight <= 0 disables the cap.
func NewLimiter(perSecond float64, burst, maxInFlight int) *Limiter {
	r := rate.Limit(perSecond)
	if perSecond <= 0 {
		r = rate.Inf
	}
	return &Limiter{rate: r, burst: max(burst, 1), maxInFlight: maxInFlight, clock: time.Now,
		servers: map[string]*serverLimit{}}
}

// WithLimiter applies l's limits to the session's requests (ping aside).
func WithLimiter(l *Limiter) Option { return func(s *Session) { s.limiter = l } }

// admit takes one request of server: nil and a release function, or a
// QUOTA_EXCEEDED refusal with data.retryAfterMs. record reports whether this
// refusal is to be written to the audit trail, and how many were left out
// since the last one that was.
func (l *Limiter) admit(server string) (release func(), refusal *errcode.Error, record bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// The time is read under the lock: a token bucket given times out of
	// order (as concurrent requests would give them) hands out extra tokens.
	now := l.clock()
	sl := l.servers[server]
	if sl == nil {
		sl = &serverLimit{bucket: rate.NewLimiter(l.rate, l.burst)}
		l.servers[server] = sl
	}
	var retry time.Duration
	switch {
	case l.maxInFlight > 0 && sl.inFlight >= l.maxInFlight:
		refusal = errcode.New(errcode.QuotaExceeded,
			fmt.Sprintf("the server has %d requests in flight, the most it may", l.maxInFlight))
		retry = 10 * time.Millisecond
	case !sl.bucket.AllowN(now, 1):
		refusal = errcode.New(errcode.QuotaExceeded,
			fmt.Sprintf("rate limit: %g requests per second, bursts of %d", float64(l.rate), l.burst))
		// The time until the bucket holds a whole token again.
		missing := 1 - sl.bucket.TokensAt(now)
		retry = time.Duration(missing / float64(l.rate) * float64(time.Second))
	}
	if refusal != nil {
		refusal.With("retryAfterMs", max(int64(math.Ceil(float64(retry)/float64(time.Millisecond))), 1))
		if now.Sub(sl.lastRecorded) >= refusalRecordInterval {
			record, suppressed = true, sl.suppressed
			sl.suppressed, sl.lastRecorded = 0, now
		} else {
			sl.suppressed++
		}
		return nil, refusal, record, suppressed
	}
	sl.inFlight++
	return func() {
		l.mu.Lock()
		sl.inFlight--
		l.mu.Unlock()
	}, nil, false, 0
}

// flushSuppressed returns, and forgets, how many refusals of server were left
// out of the audit trail since the last one recorded.
func (l *Limiter) flushSuppressed(server string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.servers[server]
	if sl == nil {
		return 0
	}
	n := sl.suppressed
	sl.suppressed = 0
	return n
}

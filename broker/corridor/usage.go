// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"sync"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// writtenToday is what caller wrote today: from the shared store when there
// is one (a store that cannot be read makes a write fail closed in
// checkUsage; other requests go on with the session's own count), else the
// session's count.
func (c *Corridor) writtenToday(caller Caller, now time.Time) int64 {
	if c.usage != nil {
		if n, err := c.usage.Today(caller.StateKey(), now); err == nil {
			return max(n, c.written.today(now))
		}
	}
	return c.written.today(now)
}

// checkUsage refuses a write when the shared usage store cannot be read: the
// daily quota could not be enforced. It reads the count verified against
// its file (usage.Store.TodayVerified), so that the decision's input, made
// next from the same cached count, misses no change to the file.
func (c *Corridor) checkUsage(caller Caller, now time.Time) error {
	if c.usage == nil {
		return nil
	}
	if _, err := c.usage.TodayVerified(caller.StateKey(), now); err != nil {
		c.log.Error("cannot read the server's usage; refusing the write", "error", err)
		return errcode.Wrap(errcode.IOError, "the daily write quota cannot be checked", err)
	}
	return nil
}

// addWritten counts n bytes written by caller now.
func (c *Corridor) addWritten(caller Caller, now time.Time, n int64) {
	c.written.add(now, n)
	if c.usage != nil {
		if _, err := c.usage.Add(caller.StateKey(), now, n); err != nil {
			c.log.Error("cannot record the server's usage", "bytes", n, "error", err)
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

func (d *dailyCounter) add(now time.Time, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roll(now)
	d.n += n
}

func (d *dailyCounter) today(now time.Time) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roll(now)
	return d.n
}

func (d *dailyCounter) roll(now time.Time) {
	if day := now.UTC().Format(time.DateOnly); day != d.day {
		d.day, d.n = day, 0
	}
}

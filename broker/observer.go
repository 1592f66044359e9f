// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import "github.com/fsbroker/fsbroker/broker/corridor"

// WithObserver has o hear the session's requests, decisions, audit appends
// and consent questions (corridor.WithObserver): the process's metrics and
// desktop notifications. Nil: nobody is told.
func WithObserver(o corridor.Observer) Option {
	return func(s *Session) { s.corridorOpts = append(s.corridorOpts, corridor.WithObserver(o)) }
}

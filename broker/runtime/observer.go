// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"time"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/metrics"
	"github.com/fsbroker/fsbroker/broker/notify"
)

// observer is what the corridors of the runtime's sessions tell: the
// process's metrics and its desktop notifications, either of which may be
// nil (off).
type observer struct {
	metrics *metrics.Metrics
	notes   *notify.Notifier
}

var _ corridor.Observer = observer{}

func (o observer) RequestStarted()                             { o.metrics.RequestStarted() }
func (o observer) RequestEnded()                               { o.metrics.RequestEnded() }
func (o observer) Decided(allow bool, code string)             { o.metrics.Decided(allow, code) }
func (o observer) DecisionTook(d time.Duration)                { o.metrics.DecisionTook(d) }
func (o observer) AuditAppended(took time.Duration, err error) { o.metrics.AuditAppended(took, err) }

func (o observer) ConsentAnswered(provider string, asked, approved int, err error) {
	o.metrics.ConsentAnswered(provider, asked, approved, err)
}

// ConsentWaiting times the wait and shows it on the desktop.
func (o observer) ConsentWaiting(provider string, req consent.Request) (ended func(asked bool)) {
	timed, shown := o.metrics.ConsentWaiting(provider), o.notes.ConsentWaiting(provider, req)
	return func(asked bool) {
		timed(asked)
		shown(asked)
	}
}

// FilesUsed shows on the desktop that a server started using files.
func (o observer) FilesUsed(caller corridor.Caller, operation, root string) {
	o.notes.FilesUsed(consent.Server{ID: caller.ID, Name: caller.Name, Version: caller.Version, Pinned: caller.Pinned},
		operation, root)
}

// corridorObserver is the observer the sessions' corridors get, nil when
// neither metrics nor notifications are on.
func (rt *Runtime) corridorObserver() corridor.Observer {
	if rt.metrics == nil && rt.notes == nil {
		return nil
	}
	return observer{metrics: rt.metrics, notes: rt.notes}
}

// Metrics returns the process's metrics (Config.Metrics), nil when off:
// serve them with metrics.Handler(rt.Metrics().Registry()).
func (rt *Runtime) Metrics() *metrics.Metrics { return rt.metrics }

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
)

// DefaultMaxWatches is the per-server watch limit (docs/protocol.md section 6).
const DefaultMaxWatches = corridor.DefaultMaxWatches

// WithWatchHub enables files/watch and files/unwatch, backed by hub (one per
// process), with at most maxWatches watches per session (0: the default).
func WithWatchHub(hub *watch.Hub, maxWatches int) Option {
	return func(s *Session) {
		s.corridorOpts = append(s.corridorOpts, corridor.WithWatchHub(hub))
		s.maxWatches = maxWatches
	}
}

type watchParams struct {
	Path      string   `json:"path"`
	Recursive bool     `json:"recursive"`
	Events    []string `json:"events"`
}

// changedParams is notifications/files/changed.
type changedParams struct {
	WatchID   string `json:"watchId"`
	Path      string `json:"path"`
	Event     string `json:"event"`
	Timestamp string `json:"timestamp"`
}

func (s *Session) filesWatch(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	var p watchParams
	if err := decodeParams(params, &p); err != nil {
		return nil, s.refuse(ctx, caller, "files/watch", params, err)
	}
	id, err := s.corridor.Watch(ctx, caller, corridor.WatchRequest{Path: p.Path, Recursive: p.Recursive,
		Events: p.Events, Params: params}, s.sendChange)
	if err != nil {
		return nil, err
	}
	return map[string]string{"watchId": id}, nil
}

// sendChange sends a change the corridor let through to the server.
func (s *Session) sendChange(ch corridor.Change) {
	err := s.conn.Notify("notifications/files/changed", changedParams{
		WatchID: ch.WatchID, Path: ch.Path, Event: ch.Event, Timestamp: ch.Time.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		s.log.Debug("cannot send a change event", "error", err)
	}
}

type unwatchParams struct {
	WatchID string `json:"watchId"`
}

func (s *Session) filesUnwatch(_ context.Context, _ corridor.Caller, params json.RawMessage) (any, error) {
	var p unwatchParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := s.corridor.Unwatch(p.WatchID); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"cmp"
	"context"
	"iter"
	"time"
)

// OPADecisionPath is the path member of every exported event: the decision fsbroker asks its
// policy for, data.fsbroker.authz.decision, written the way OPA writes paths.
const OPADecisionPath = "fsbroker/authz/decision"

// OPABundleName is the bundle name under which an event's bundles member carries the policy
// revision: fsbroker decides with one policy set, whether built in, a directory or a bundle.
const OPABundleName = "fsbroker"

// DefaultOutcomeWindow is how much later, in trail time, an outcome may come and still be
// joined to its decision, unless [OPAOptions] says otherwise.
const DefaultOutcomeWindow = 10 * time.Minute

// maxPendingDecisions bounds the decisions that wait for their outcome; past it the oldest is
// exported without one.
const maxPendingDecisions = 10000

// OPAEvent is one decision-log event in the JSON format of OPA's decision_logs plugin: the
// members of EventV1 in github.com/open-policy-agent/opa/v1/plugins/logs as of OPA v1.22.2,
// with the same names and types, so that a decision-log service or a SIEM pipeline built for
// OPA takes fsbroker's decisions as they come. Members that an fsbroker record has nothing for
// (query, trace_id, nd_builtin_cache, ...) are left out, as OPA leaves them out when empty.
//
// Input is not the policy input the decision was made on (the trail does not keep it, nor any
// file content) but what the record holds of it. The outcome of the operation, when the trail
// has it, goes in custom, the member OPA itself gives for data outside its own format.
type OPAEvent struct {
	// Labels are id (the writer: one broker process, see [Entry.Writer]), version (from
	// [OPAOptions]) and app ("fsbroker").
	Labels map[string]string `json:"labels"`
	// DecisionID is the record's decisionId.
	DecisionID string `json:"decision_id"`
	// Bundles maps [OPABundleName] to the record's policyRevision; absent when it has none.
	Bundles map[string]OPABundleInfo `json:"bundles,omitempty"`
	// Path is [OPADecisionPath].
	Path string `json:"path"`
	// Input is what the record holds of the request.
	Input OPAInput `json:"input"`
	// Result is the decision.
	Result OPAResult `json:"result"`
	// RequestedBy is "fsbroker".
	RequestedBy string `json:"requested_by"`
	// Timestamp is the record's time, in RFC 3339 with nanoseconds as OPA writes it.
	Timestamp string `json:"timestamp"`
	// Metrics holds timer_rego_query_eval_ns: the record's latencyUs in nanoseconds. It times
	// the whole decision (building the input and evaluating), so it is an upper bound of OPA's
	// own timer of that name. Absent when the record has no latency.
	Metrics map[string]int64 `json:"metrics,omitempty"`
	// Custom says where the record is in the trail and holds the joined outcome.
	Custom OPACustom `json:"custom"`
}

// OPABundleInfo is the revision of a bundle, as in OPA's BundleInfoV1.
type OPABundleInfo struct {
	// Revision is the policy revision.
	Revision string `json:"revision,omitempty"`
}

// OPAInput is the input member of an exported event.
type OPAInput struct {
	// Method is the JSON-RPC method asked for.
	Method string `json:"method"`
	// Operation is the policy operation (read, write, ...).
	Operation string `json:"operation,omitempty"`
	// Server is the MCP server that asked.
	Server OPAID `json:"server"`
	// Session is the session it asked in.
	Session OPAID `json:"session"`
	// Paths are the record's paths: canonical paths, or digests where paths are redacted.
	Paths []string `json:"paths"`
}

// OPAID is an object with an id member.
type OPAID struct {
	// ID identifies the object.
	ID string `json:"id"`
}

// OPAResult is the result member of an exported event: the decision.
type OPAResult struct {
	// Allow is the decision.
	Allow bool `json:"allow"`
	// Code is the decision's code; absent when the record has none.
	Code string `json:"code,omitempty"`
	// Reasons are the policy's reasons; absent when none. The trail does not keep the
	// decision's obligations, so they are never exported.
	Reasons []string `json:"reasons,omitempty"`
}

// OPACustom is the custom member of an exported event.
type OPACustom struct {
	// Audit locates the decision record in the trail.
	Audit OPAAuditRef `json:"audit"`
	// Outcome is the outcome record of the decision, when it was found (see [OPAEvents]).
	Outcome *OPAOutcome `json:"outcome,omitempty"`
}

// OPAAuditRef locates a record in the trail, so an exported event can be traced back to the
// record that [Verify] checks.
type OPAAuditRef struct {
	// Segment is the segment's id.
	Segment string `json:"segment"`
	// Seq is the record's seq in the segment.
	Seq uint64 `json:"seq"`
}

// OPAOutcome is what an outcome record says of the operation, with the record's member names.
type OPAOutcome struct {
	// Outcome is "ok" or the operation's error code.
	Outcome string `json:"outcome"`
	// Code is the error's code.
	Code string `json:"code,omitempty"`
	// Bytes counts the bytes read or written.
	Bytes int64 `json:"bytes,omitempty"`
	// DurationUs is how long the operation took, in microseconds.
	DurationUs int64 `json:"durationUs,omitempty"`
	// Errno is the system error number of a failed operation.
	Errno int `json:"errno,omitempty"`
	// Detail is the record's short explanation.
	Detail string `json:"detail,omitempty"`
	// Time is the outcome record's time.
	Time string `json:"time"`
}

// OPAOptions configure [OPAEvents].
type OPAOptions struct {
	// Filter selects the decisions to export; its Kind is ignored (only decision records are
	// exported). Outcomes are joined whatever the filter says of them.
	Filter Filter
	// Version is labels.version: the version of fsbroker that exports (the trail does not say
	// which version decided).
	Version string
	// OutcomeWindow is how much later, in trail time, an outcome may come and still be joined;
	// zero means [DefaultOutcomeWindow].
	OutcomeWindow time.Duration
}

// ExportOPA reads the trail at path (a segment file or a directory) and returns its decisions
// as OPA decision-log events, in time order; see [OPAEvents]. Like [Records], it needs no key
// and does not verify.
func ExportOPA(ctx context.Context, path string, opts OPAOptions) iter.Seq2[OPAEvent, error] {
	return func(yield func(OPAEvent, error) bool) {
		// Outcomes come after their decisions, so the since bound is safe to read with.
		r, err := NewReader(path, Filter{Since: opts.Filter.Since})
		if err != nil {
			yield(OPAEvent{}, err)
			return
		}
		for ev, err := range OPAEvents(r.Entries(ctx), opts) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// OPAEvents converts the decision records of entries that match opts.Filter into OPA
// decision-log events, in the order of entries, joining to each the outcome record with the
// same decisionId (into custom.outcome) when that outcome comes within opts.OutcomeWindow of
// trail time after the decision and while fewer than 10,000 decisions wait for theirs. Entries
// must include the outcome records (read them unfiltered). Errors from entries are passed on,
// and converting goes on after them.
func OPAEvents(entries iter.Seq2[Entry, error], opts OPAOptions) iter.Seq2[OPAEvent, error] {
	return func(yield func(OPAEvent, error) bool) {
		f := opts.Filter
		f.Kind = KindDecision
		if err := f.Validate(); err != nil {
			yield(OPAEvent{}, err)
			return
		}
		m := f.prepare()
		window := cmp.Or(opts.OutcomeWindow, DefaultOutcomeWindow)
		type pending struct {
			dec      Entry
			out      *Record
			deadline string // in TimeLayout: past it, the outcome is not waited for
		}
		var queue []*pending
		byID := make(map[string]*pending)
		// flush exports the decisions at the head of the queue that need not wait: their
		// outcome came, or now is past their deadline, or too many wait; all of them at the end.
		flush := func(now string, all bool) bool {
			for len(queue) > 0 {
				p := queue[0]
				if !all && p.out == nil && now < p.deadline && len(queue) <= maxPendingDecisions {
					return true
				}
				queue = queue[1:]
				if byID[p.dec.Record.DecisionID] == p {
					delete(byID, p.dec.Record.DecisionID)
				}
				if !yield(opaEvent(&p.dec, p.out, opts.Version), nil) {
					return false
				}
			}
			return true
		}
		for e, err := range entries {
			if err != nil {
				if !yield(OPAEvent{}, err) {
					return
				}
				continue
			}
			r := &e.Record
			switch {
			case r.Kind == KindDecision && m.match(r):
				p := &pending{dec: e, deadline: r.Time}
				p.dec.Raw = nil
				if t, err := time.Parse(TimeLayout, r.Time); err == nil {
					p.deadline = formatTime(t.Add(window))
				}
				queue = append(queue, p)
				byID[r.DecisionID] = p
			case r.Kind == KindOutcome:
				if p := byID[r.DecisionID]; p != nil && p.out == nil {
					out := *r
					p.out = &out
				}
			}
			if !flush(r.Time, false) {
				return
			}
		}
		flush("", true)
	}
}

// opaEvent converts a decision record, and its outcome when known, into an event.
func opaEvent(dec *Entry, out *Record, version string) OPAEvent {
	r := &dec.Record
	ev := OPAEvent{
		Labels:      map[string]string{"id": dec.Writer, "version": version, "app": "fsbroker"},
		DecisionID:  r.DecisionID,
		Path:        OPADecisionPath,
		RequestedBy: "fsbroker",
		Timestamp:   r.Time,
		Input: OPAInput{
			Method:    r.Method,
			Operation: r.Operation,
			Server:    OPAID{ID: r.Server},
			Session:   OPAID{ID: r.SessionID},
			Paths:     r.Paths,
		},
		Result: OPAResult{Allow: r.Allow != nil && *r.Allow, Code: r.Code, Reasons: r.Reasons},
		Custom: OPACustom{Audit: OPAAuditRef{Segment: dec.Segment, Seq: r.Seq}},
	}
	if ev.Input.Paths == nil {
		ev.Input.Paths = []string{}
	}
	if t, err := time.Parse(TimeLayout, r.Time); err == nil {
		ev.Timestamp = t.Format(time.RFC3339Nano)
	}
	if r.PolicyRevision != "" {
		ev.Bundles = map[string]OPABundleInfo{OPABundleName: {Revision: r.PolicyRevision}}
	}
	if r.LatencyUs > 0 {
		ev.Metrics = map[string]int64{"timer_rego_query_eval_ns": r.LatencyUs * 1000}
	}
	if out != nil {
		ev.Custom.Outcome = &OPAOutcome{
			Outcome: out.Outcome, Code: out.Code, Bytes: out.Bytes, DurationUs: out.DurationUs,
			Errno: out.Errno, Detail: out.Detail, Time: out.Time,
		}
	}
	return ev
}

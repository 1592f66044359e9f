// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import "strconv"

// OPAConsentPath is the path member of the event of a consent round: the rule a files/consent
// request is narrowed by, data.fsbroker.authz.consentable, written the way OPA writes paths.
const OPAConsentPath = "fsbroker/authz/consentable"

// OPAEventOf converts one record into an OPA decision-log event, for an uploader that streams a
// trail as it grows and so does its own joining: a decision record, with out (its outcome
// record, or nil) joined as [OPAEvents] joins it, and a consent record (a files/consent round;
// out is ignored). ok is false for a record of any other kind.
//
// The mapping is the one of [OPAEvents] (and so of `fsbroker audit export --format opa`), with
// two additions that export does not make:
//
//   - a decision record without reasons but with a detail (a request refused before the policy,
//     or by the rate limiter: the reason and the path as the server wrote it) has the detail as
//     its one reason;
//   - a consent record becomes an event too: path [OPAConsentPath], decision_id
//     [ConsentDecisionID], input {method: "files/consent", operation: the access asked for,
//     server, session, paths: the approved paths}, result {allow: whether anything was
//     approved, reasons: [the record's detail: counts and who decided]}.
func OPAEventOf(e *Entry, out *Record, version string) (ev OPAEvent, ok bool) {
	r := &e.Record
	switch r.Kind {
	case KindDecision:
		ev = opaEvent(e, out, version)
	case KindConsent:
		ev = opaEvent(e, nil, version)
		ev.DecisionID = ConsentDecisionID(e.Segment, r.Seq)
		ev.Path = OPAConsentPath
	default:
		return OPAEvent{}, false
	}
	if len(ev.Result.Reasons) == 0 && r.Detail != "" {
		ev.Result.Reasons = []string{r.Detail}
	}
	return ev, true
}

// ConsentDecisionID is the decision_id of the event of a consent record, which has no decision
// id of its own: "consent:<segment>:<seq>", unique in a trail and the same every time the
// record is converted.
func ConsentDecisionID(segment string, seq uint64) string {
	return "consent:" + segment + ":" + strconv.FormatUint(seq, 10)
}

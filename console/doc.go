// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package console is fsbroker console (PROTOCOL.md section 11): a web page,
// served by a process of its own, for the person at the machine, over every
// broker process that shares a state directory. It shows, and keeps up to
// date with Server-Sent Events:
//
//   - consent: the questions brokers run with --consent console put in the
//     state directory's queue (broker/consent's Queue), with the server's
//     identity (pinned, or only declared), the paths and their roots, the
//     access, what the policy removed and why, and the server's message; the
//     person approves all, some or none, and the waiting broker answers;
//   - activity: the audit trail's records as the brokers write them (read as
//     fsbroker audit tail -f reads them: audit.Reader, every 200 ms),
//     filtered by server, method, path and result, refusals marked;
//   - grants: every grant, pre-approved root and block of the state
//     directory (broker/grants, watched), with a button that revokes a grant
//     or a pre-approval and one that lifts a block, through the functions the
//     host gives (cmd/fsbroker gives those of fsbroker grants revoke and
//     restore);
//   - the trail: a search by time, server, path (or a path's keyed digest,
//     where paths are redacted), method and result, and each segment's
//     verification status (audit.Verify).
//
// The page is server-rendered (html/template) with one small script, every
// asset embedded; the Content-Security-Policy allows nothing but this origin.
//
// # Who may use it
//
// New makes a random token (256 bits from crypto/rand) and a secret path
// prefix (/c/ and 128 random bits) every page is served under; the URL to
// open holds both, once. A request under the prefix with the right token in
// its query gets a cookie holding a session secret of its own (not the
// token; HttpOnly, SameSite=Strict, Path the prefix, named for the port) and
// is sent on to the same address without the token. Cookies ignore ports:
// with the prefix as its Path the browser sends the cookie to no other
// server of this machine. Every other request needs the cookie, compared
// in constant time, and gets 401 without it (or outside the prefix), assets
// included; with it, a request a page of another site or port sends
// (Sec-Fetch-Site other than same-origin or none) gets 403. Every request
// must name, in its Host header, an address the console is served on (on
// loopback: 127.0.0.1, localhost or [::1], with the port), so that a page
// of another site whose name is made to point at 127.0.0.1 (DNS rebinding)
// is refused. A POST (every change: an answer, a revocation, a restore, a
// verification) must also come with an Origin header that is exactly the
// console's own (scheme, host and port): the SameSite cookie alone is not
// enough, since a page served from another port of the same machine is the
// same site. Non-loopback addresses are served only over TLS (Endpoint).
package console

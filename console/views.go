// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/grants"
)

// How many records a page shows.
const (
	activityRows = 200
	searchRows   = 500
)

// timeShown is how the page shows times: UTC, to the millisecond.
const timeShown = "2006-01-02 15:04:05.000Z"

// methods are the methods the filters suggest.
var methods = []string{"files/read", "files/write", "files/list", "files/create", "files/delete", "files/rename",
	"files/watch", "files/unwatch", "files/consent", "roots/list", "grants/revoke", "grants/restore"}

// templateFuncs are the functions the templates use.
var templateFuncs = template.FuncMap{
	"shown": consent.ShowUntrusted,
	"utc":   func(t time.Time) string { return t.UTC().Format(timeShown) },
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}

// page is what every page's template gets.
type page struct {
	Title    string
	View     string
	StateDir string
	AuditDir string
	Pending  int
	Flash    *flash
	Filter   filterForm
	Methods  []string
	Results  []string
	// After is the activity page's last record index.
	After uint64
	// The views' own data.
	Consent  consentList
	Activity []row
	Grants   grantsView
	Trail    trailView
}

// flash is the note a page shows after a change: a fixed text per kind
// of outcome, with counts.
type flash struct {
	Error bool
	Text  string
}

// flashOf reads the note a change's redirect asks for.
func flashOf(q url.Values) *flash {
	n := func(k string) int { v, _ := strconv.Atoi(q.Get(k)); return max(v, 0) }
	switch q.Get("done") {
	case "answered":
		return &flash{Text: fmt.Sprintf("Answered: %d of %d path(s) approved. The broker answers the server.", n("approved"), n("of"))}
	case "revoked":
		return &flash{Text: fmt.Sprintf("Revoked %d grant(s); %d block(s) of pre-approved access in place. Running brokers refuse what they covered within a second.", n("grants"), n("blocks"))}
	case "lifted":
		return &flash{Text: fmt.Sprintf("Lifted %d block(s). Running brokers allow the pre-approved access again within a second.", n("blocks"))}
	case "verified":
		return &flash{Text: "The trail was verified again."}
	case "verifying":
		return &flash{Text: "The trail is being verified; reload the page to see the outcome."}
	}
	switch q.Get("error") {
	case "gone":
		return &flash{Error: true, Text: "That request is no longer waiting: it was answered already, or its broker stopped waiting (its time limit). Nothing was changed."}
	case "notasked":
		return &flash{Error: true, Text: "The answer named a path the request did not ask about. Nothing was approved."}
	case "nomatch":
		return &flash{Error: true, Text: "Nothing matched: it was revoked or lifted already."}
	case "failed":
		return &flash{Error: true, Text: "The change could not be made completely; the console's log says why."}
	}
	return nil
}

// newPage is the page data every view starts from.
func (s *Server) newPage(r *http.Request, view, title string) page {
	list, _ := s.pendingList()
	return page{Title: title, View: view, StateDir: s.cfg.StateDir, AuditDir: s.cfg.AuditDir, Pending: len(list.Requests),
		Flash: flashOf(r.URL.Query()), Methods: methods, Results: resultChoices(), Consent: list}
}

// render writes a page.
func (s *Server) render(w http.ResponseWriter, p page) {
	var b bytes.Buffer
	if err := s.pages.ExecuteTemplate(&b, "page", p); err != nil {
		s.log.Error("cannot render the page", "view", p.View, "error", err)
		http.Error(w, "500: the page cannot be shown", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// renderEvent renders the template name with data as the event of that
// name.
func (s *Server) renderEvent(name, tmpl string, data any) event {
	var b bytes.Buffer
	if err := s.pages.ExecuteTemplate(&b, tmpl, data); err != nil {
		s.log.Error("cannot render an update", "template", tmpl, "error", err)
	}
	return event{name: name, data: b.String()}
}

// back sends the browser to the view path (under the console's prefix)
// with the query q (a change's outcome): POST, then redirect, then GET.
func (s *Server) back(w http.ResponseWriter, r *http.Request, path string, q url.Values) {
	http.Redirect(w, r, s.prefix+path+"?"+q.Encode(), http.StatusSeeOther)
}

// consentList is the consent view's list of waiting requests.
type consentList struct {
	Requests []consent.QueuedView
}

// pendingList returns the requests waiting, and their ids joined (to tell
// when the list changed).
func (s *Server) pendingList() (consentList, string) {
	rs, err := s.cfg.Queue.Pending(time.Now())
	if err != nil {
		s.log.Warn("a consent request file cannot be read", "error", err)
	}
	var (
		list consentList
		ids  []string
	)
	for _, r := range rs {
		list.Requests = append(list.Requests, r.View())
		ids = append(ids, r.ID)
	}
	return list, strings.Join(ids, ",")
}

func (s *Server) consentPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, s.newPage(r, viewConsent, "Consent"))
}

// answer answers a consent request: the paths checked, all of them, or
// none.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "400: "+err.Error(), http.StatusBadRequest)
		return
	}
	id := r.PostForm.Get("id")
	var approved []string
	switch r.PostForm.Get("answer") {
	case "checked":
		approved = r.PostForm["path"]
	case "all":
		approved = nil // below: every path of the request
	case "none":
		approved = []string{}
	default:
		http.Error(w, "400: answer must be checked, all or none", http.StatusBadRequest)
		return
	}
	if approved == nil {
		for _, q := range s.pendingRequests() {
			if q.ID == id {
				approved = q.Request.Paths
			}
		}
	}
	req, err := s.cfg.Queue.Answer(id, approved, time.Now())
	q := url.Values{}
	switch {
	case errors.Is(err, consent.ErrNoRequest), errors.Is(err, consent.ErrAnswered):
		q.Set("error", "gone")
	case errors.Is(err, consent.ErrNotAsked):
		q.Set("error", "notasked")
	case err != nil:
		s.log.Error("cannot answer a consent request", "id", id, "error", err)
		q.Set("error", "failed")
	default:
		s.log.Info("consent answered", "id", id, "server", req.Request.Server.ID, "approved", len(approved), "of", len(req.Request.Paths))
		q.Set("done", "answered")
		q.Set("approved", strconv.Itoa(len(approved)))
		q.Set("of", strconv.Itoa(len(req.Request.Paths)))
	}
	s.back(w, r, "/consent", q)
}

// pendingRequests are the requests waiting.
func (s *Server) pendingRequests() []consent.QueuedRequest {
	rs, _ := s.cfg.Queue.Pending(time.Now())
	return rs
}

// filterForm is the activity and trail filters as the form holds them.
type filterForm struct {
	Server, Method, Path, Result string
	// Digest: Path is a path whose keyed digest is searched for (trails
	// with redacted paths).
	Digest bool
	// Since and Until bound the time (the trail): UTC, as a datetime-local
	// input gives it.
	Since, Until string
}

// filterFormOf reads the filters of a query.
func filterFormOf(q url.Values) filterForm {
	return filterForm{Server: q.Get("server"), Method: q.Get("method"), Path: strings.TrimSpace(q.Get("path")),
		Result: q.Get("result"), Digest: q.Get("digest") == "on", Since: q.Get("since"), Until: q.Get("until")}
}

// resultChoices are the results a filter may name: allow and deny (the
// decision), ok and each error code (the decision's code, or the outcome).
func resultChoices() []string {
	out := []string{"allow", "deny", "ok"}
	for _, c := range errcode.Codes() {
		out = append(out, string(c))
	}
	return out
}

// filterOf makes the audit filter a form describes. A path holding a
// digest (hmac-sha256:...) is searched for as given; with Digest, the path's
// keyed digest under the audit key; otherwise the path and what is beneath
// it.
func (s *Server) filterOf(form filterForm) (audit.Filter, error) {
	f := audit.Filter{Server: form.Server, Method: form.Method}
	switch form.Result {
	case "":
	case "allow", "deny":
		f.Decision = form.Result
	default:
		if !slices.Contains(resultChoices(), form.Result) {
			return f, fmt.Errorf("result %.40q: want allow, deny, ok or an error code", form.Result)
		}
		f.Code = form.Result
	}
	switch {
	case form.Path == "":
	case strings.HasPrefix(form.Path, audit.PathDigestPrefix):
		f.PathDigest = form.Path
	case form.Digest:
		keys, err := s.cfg.Keys()
		if err != nil {
			return f, fmt.Errorf("no audit key to compute the path's digest with: %w", err)
		}
		f.PathDigest = audit.PathDigest(keys.MAC[0], form.Path)
	default:
		f.PathPrefix = form.Path
	}
	var err error
	if f.Since, err = formTime("since", form.Since); err != nil {
		return f, err
	}
	if f.Until, err = formTime("until", form.Until); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	return f, nil
}

// formTime reads a datetime-local value, in UTC; "" is no bound.
func formTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02T15:04:05.999"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %.40q: want a date and time, YYYY-MM-DDTHH:MM (UTC)", name, v)
}

// row is a record as a table row.
type row struct {
	Index   uint64
	Time    string
	Kind    string
	Server  string
	Method  string
	Result  string
	Refused bool
	Code    string
	Paths   []string
	Detail  string
	Segment string
}

// rowOf makes a record's row. A refusal is a decision that did not allow,
// an outcome that is an error, a consent that approved nothing, or a
// revocation.
func rowOf(r record) row {
	rec := &r.rec
	out := row{Index: r.index, Kind: string(rec.Kind), Server: rec.Server, Method: rec.Method, Code: rec.Code,
		Paths: rec.Paths, Segment: r.segment, Result: rec.Outcome}
	if t, err := time.Parse(audit.TimeLayout, rec.Time); err == nil {
		out.Time = t.UTC().Format(timeShown)
	} else {
		out.Time = rec.Time
	}
	if rec.Allow != nil {
		out.Result = "deny"
		if *rec.Allow {
			out.Result = "allow"
		}
	}
	out.Refused = out.Result == "deny" || rec.Outcome != "" && rec.Outcome != "ok"
	out.Detail = strings.Join(rec.Reasons, "; ")
	if out.Detail == "" {
		out.Detail = rec.Detail
	}
	return out
}

func (s *Server) activityPage(w http.ResponseWriter, r *http.Request) {
	p := s.newPage(r, viewActivity, "Activity")
	p.Filter = filterFormOf(r.URL.Query())
	f, err := s.filterOf(p.Filter)
	if err != nil {
		p.Flash = &flash{Error: true, Text: "The filter cannot be used: " + err.Error()}
		f = audit.Filter{}
	}
	recs, last := s.feed.latest(&f, activityRows)
	p.After = last
	for _, rec := range recs {
		p.Activity = append(p.Activity, rowOf(rec))
	}
	s.render(w, p)
}

// grantsView is the grants view's tables.
type grantsView struct {
	Grants       []grantRow
	Preapprovals []preapprovalRow
	RootsKnown   bool
	Blocks       []blockRow
	Problem      string
}

type grantRow struct {
	ID, Server, Access, Path, Root, Age, Granted, Expires, By string
	Pinned, Expired                                           bool
}

type preapprovalRow struct {
	Mount, Dir, Access string
}

type blockRow struct {
	ID, Server, Path, Root, Blocked, By string
	Pinned, EveryServer                 bool
}

// grantsData reads the grants, pre-approvals and blocks.
func (s *Server) grantsData() grantsView {
	var v grantsView
	now := time.Now()
	gs, gErr := s.cfg.Grants.ListAll()
	bs, bErr := s.cfg.Grants.ListBlocks()
	if err := errors.Join(gErr, bErr); err != nil {
		v.Problem = err.Error()
	}
	for _, g := range gs {
		id, pinned := corridor.IdentityOf(g.Server)
		gr := grantRow{ID: g.ID, Server: id, Pinned: pinned, Access: string(g.Access), Path: g.Path, Root: g.Root.Path,
			Age: age(now.Sub(g.Granted)), Granted: g.Granted.UTC().Format(timeShown), Expires: "never", By: g.By, Expired: !g.Live(now)}
		if !g.Expires.IsZero() {
			gr.Expires = g.Expires.UTC().Format(timeShown)
		}
		v.Grants = append(v.Grants, gr)
	}
	if s.cfg.Roots != nil {
		v.RootsKnown = true
		for _, r := range s.cfg.Roots.All() {
			if r.Preapproved {
				access := string(grants.Read)
				if r.Writable {
					access = string(grants.Write)
				}
				v.Preapprovals = append(v.Preapprovals, preapprovalRow{Mount: r.Mount, Dir: r.Path, Access: access})
			}
		}
	}
	for _, b := range bs {
		id, pinned := corridor.IdentityOf(b.Server)
		br := blockRow{ID: b.ID, Server: id, Pinned: pinned, EveryServer: b.EveryServer(), Path: b.Path, Root: b.Root.Path,
			Blocked: b.Blocked.UTC().Format(timeShown), By: b.By}
		v.Blocks = append(v.Blocks, br)
	}
	return v
}

// age says how long ago, roughly.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// grantsEvent is the grants view's tables, rendered.
func (s *Server) grantsEvent() event {
	return s.renderEvent("grants", "grants-tables", s.grantsData())
}

func (s *Server) grantsPage(w http.ResponseWriter, r *http.Request) {
	p := s.newPage(r, viewGrants, "Grants")
	p.Grants = s.grantsData()
	s.render(w, p)
}

// revoke revokes a grant (id), or a pre-approved root's access for every
// server (path: the mount), as fsbroker grants revoke --id or --path does.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "400: "+err.Error(), http.StatusBadRequest)
		return
	}
	f := grants.RevokeFilter{ID: r.PostForm.Get("id"), Path: r.PostForm.Get("path")}
	if (f.ID == "") == (f.Path == "") {
		http.Error(w, "400: give a grant id or a mount", http.StatusBadRequest)
		return
	}
	if f.Path != "" {
		if err := grants.ValidPath(f.Path); err != nil {
			http.Error(w, "400: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	c, err := s.cfg.Revoke(f)
	q := url.Values{}
	switch {
	case err != nil:
		s.log.Error("revoke", "id", f.ID, "path", f.Path, "error", err)
		q.Set("error", "failed")
	case c.Revoked == 0 && c.Blocked == 0:
		q.Set("error", "nomatch")
	default:
		s.log.Info("revoked", "id", f.ID, "path", f.Path, "grants", c.Revoked, "blocks", c.Blocked)
		q.Set("done", "revoked")
		q.Set("grants", strconv.Itoa(c.Revoked))
		q.Set("blocks", strconv.Itoa(c.Blocked))
	}
	s.back(w, r, "/grants", q)
}

// restore lifts a block, as fsbroker grants restore --id does.
func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "400: "+err.Error(), http.StatusBadRequest)
		return
	}
	id := r.PostForm.Get("id")
	if id == "" {
		http.Error(w, "400: give a block id", http.StatusBadRequest)
		return
	}
	c, err := s.cfg.Restore(grants.RevokeFilter{ID: id})
	q := url.Values{}
	switch {
	case err != nil:
		s.log.Error("restore", "id", id, "error", err)
		q.Set("error", "failed")
	case c.Lifted == 0:
		q.Set("error", "nomatch")
	default:
		s.log.Info("lifted a block", "id", id)
		q.Set("done", "lifted")
		q.Set("blocks", strconv.Itoa(c.Lifted))
	}
	s.back(w, r, "/grants", q)
}

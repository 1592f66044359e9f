// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/metrics"
	"github.com/fsbroker/fsbroker/broker/roots"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// tokenBytes is the size of the token and of the session the cookie
// holds: 256 random bits.
const tokenBytes = 32

// prefixBytes is the size of the secret path prefix every page is served
// under: 128 random bits.
const prefixBytes = 16

// contentSecurityPolicy lets the page load its own script, style and
// images and connect to its own origin (the event stream), and nothing
// else: no inline script or style, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Config is what the console serves.
type Config struct {
	// StateDir is the state directory, as the page names it.
	StateDir string
	// Queue is the state directory's consent queue (consent.OpenQueue).
	Queue *consent.Queue
	// Grants is the state directory's grants store.
	Grants *grants.Store
	// AuditDir is the audit trail's directory.
	AuditDir string
	// Roots are the brokers' roots, when known (nil: the pre-approved roots
	// are not shown).
	Roots *roots.Set
	// Keys returns the keys to verify the trail with, and the audit key for
	// path digests; it is called at each use, so a key made after the
	// console started is found.
	Keys func() (audit.VerifyKeys, error)
	// Revoke takes away what f selects as fsbroker grants revoke does
	// (grants, and pre-approved access unless f names an ID), recording it
	// in the audit trail.
	Revoke func(f grants.RevokeFilter) (Change, error)
	// Restore lifts the blocks f selects as fsbroker grants restore does,
	// recording it in the audit trail.
	Restore func(f grants.RevokeFilter) (Change, error)
	// Endpoint is where the console listens (NewEndpoint).
	Endpoint Endpoint
	// Log is the console's log; nil logs nothing.
	Log hclog.Logger
	// Metrics, when set, are served at GET /metrics (Prometheus text
	// format), with every decision record the console reads from the trail
	// counted in them, so that their decision counter is the trail's.
	Metrics *metrics.Metrics
}

// Change is what a revocation or a restore changed.
type Change struct {
	// Revoked counts the grants revoked, Blocked the blocks made (or there
	// already), Lifted the blocks lifted.
	Revoked, Blocked, Lifted int
}

// metricsPath is where the console serves its metrics.
const metricsPath = "/metrics"

// Server is the console: an http.Handler, and what keeps its views up to
// date (Run).
type Server struct {
	cfg      Config
	log      hclog.Logger
	token    string
	session  string // the cookie's value
	prefix   string // "/c/<128 random bits>": every page is under it
	cookie   string
	scheme   string
	hosts    map[string]bool // Host headers served: host:port, lower case
	origins  map[string]bool // Origin headers taken on a POST
	url      string
	mux      *http.ServeMux
	pages    *template.Template
	hub      *hub
	feed     *feed
	streams  chan struct{} // one token per event stream open (maxStreams)
	verifier verifier
	// searching holds a token while a trail search runs: one at a time.
	searching chan struct{}
	// searchBudget is how many records a trail search reads at most.
	searchBudget int
}

// New returns the console for cfg, served at bound (the listener's
// address). It makes the token.
func New(cfg Config, bound net.Addr) (*Server, error) {
	if cfg.Queue == nil || cfg.Grants == nil || cfg.Keys == nil || cfg.Revoke == nil || cfg.Restore == nil {
		return nil, errors.New("console: Queue, Grants, Keys, Revoke and Restore are required")
	}
	s := &Server{cfg: cfg, log: cfg.Log, token: randomString(tokenBytes), session: randomString(tokenBytes),
		prefix: "/c/" + randomString(prefixBytes),
		hosts:  map[string]bool{}, origins: map[string]bool{}, hub: newHub(), feed: newFeed(),
		streams: make(chan struct{}, maxStreams), searching: make(chan struct{}, 1), searchBudget: searchReadLimit}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	scheme, hosts := cfg.Endpoint.origins(bound)
	s.scheme = scheme
	for _, h := range hosts {
		s.hosts[h] = true
		s.origins[scheme+"://"+h] = true
	}
	_, port, _ := net.SplitHostPort(hosts[0])
	s.cookie = "fsbroker-console-" + port // cookies ignore ports: one name per console
	s.url = scheme + "://" + hosts[0] + s.prefix + "/?token=" + s.token
	pages, err := template.New("").Funcs(templateFuncs).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	s.pages = pages
	s.feed.row = func(r record) string { return s.renderEvent("activity", "activity-row", rowOf(r)).data }
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	s.mux = http.NewServeMux()
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.prefix+"/consent", http.StatusSeeOther)
	})
	s.mux.HandleFunc("GET /consent", s.consentPage)
	s.mux.HandleFunc("POST /consent/answer", s.answer)
	s.mux.HandleFunc("GET /activity", s.activityPage)
	s.mux.HandleFunc("GET /grants", s.grantsPage)
	s.mux.HandleFunc("POST /grants/revoke", s.revoke)
	s.mux.HandleFunc("POST /grants/restore", s.restore)
	s.mux.HandleFunc("GET /trail", s.trailPage)
	if cfg.Metrics != nil {
		s.mux.Handle("GET "+metricsPath, metrics.Handler(cfg.Metrics.Registry()))
	}
	s.mux.HandleFunc("POST /trail/verify", s.verifyNow)
	s.mux.HandleFunc("GET /events", s.events)
	return s, nil
}

// URL is the address to open: it holds the token. Print it once.
func (s *Server) URL() string { return s.url }

// randomString is n random bytes (crypto/rand), base64url without padding.
func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Handle mounts h at pattern (an http.ServeMux pattern: "GET /metrics"),
// behind the same checks as the pages: the Host header, the token, and the
// Origin of a POST. It is where the console's metrics are to be mounted.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// ServeHTTP checks who asks (doc: "Who may use it"), then serves the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" would make the browser send Origin: null on a POST
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !s.hosts[strings.ToLower(r.Host)] {
		// DNS rebinding: a name made to point at this machine is still not
		// one the console is served on.
		http.Error(w, "421: the console is not served under the host "+r.Host, http.StatusMisdirectedRequest)
		return
	}
	// Every page is under the secret prefix, and so is the cookie's Path:
	// a browser sends the cookie to no other server of this host (cookies
	// ignore ports), unless asked for a URL under the prefix.
	rest, inside := strings.CutPrefix(r.URL.Path, s.prefix)
	inside = inside && strings.HasPrefix(rest, "/")
	if !inside {
		rest = r.URL.Path
	}
	if rest == metricsPath && s.cfg.Metrics != nil && r.Method == http.MethodGet && r.Header.Get("Authorization") != "" {
		// A Prometheus scraper sends the token as a bearer token; it has
		// no cookie. Only GET /metrics takes it so, under the prefix or not.
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || !s.tokenMatches(bearer) {
			s.unauthorized(w)
			return
		}
		s.mux.ServeHTTP(w, s.stripped(r, rest))
		return
	}
	if !inside {
		s.unauthorized(w)
		return
	}
	if token, ok := r.URL.Query()["token"]; ok {
		if r.Method != http.MethodGet || len(token) != 1 || !s.tokenMatches(token[0]) {
			s.unauthorized(w)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.session, Path: s.prefix, HttpOnly: true,
			Secure: s.scheme == "https", SameSite: http.SameSiteStrictMode})
		// The token leaves the address bar (and the history) at once.
		q := r.URL.Query()
		q.Del("token")
		to := url.URL{Path: s.prefix + rest, RawQuery: q.Encode()}
		http.Redirect(w, r, to.String(), http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(s.cookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) != 1 {
		s.unauthorized(w)
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		// A page of another site, or of another port of this machine
		// (same-site: the SameSite cookie goes with its requests), gets
		// nothing: no search, no verification, no event stream held open.
		http.Error(w, "403: the console answers its own pages and the address bar only (Sec-Fetch-Site "+site+")", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if !s.sameOrigin(r) {
			http.Error(w, "403: a change must come from the console's own page (Origin "+r.Header.Get("Origin")+")", http.StatusForbidden)
			return
		}
	}
	s.mux.ServeHTTP(w, s.stripped(r, rest))
}

// stripped is r for the path rest, the prefix taken off (as
// http.StripPrefix does).
func (s *Server) stripped(r *http.Request, rest string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path = rest
	r2.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, s.prefix)
	return r2
}

// tokenMatches compares v with the token in constant time.
func (s *Server) tokenMatches(v string) bool {
	return subtle.ConstantTimeCompare([]byte(v), []byte(s.token)) == 1
}

// sameOrigin reports whether a state-changing request comes from the
// console's own page: its Origin is exactly one the console is served on,
// and Sec-Fetch-Site, when the browser sends it, says same-origin.
func (s *Server) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	return s.origins[strings.ToLower(r.Header.Get("Origin"))]
}

// unauthorized answers 401.
func (s *Server) unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Cookie realm="fsbroker console"`)
	http.Error(w, "401: open the address fsbroker console printed when it started (it holds the token)", http.StatusUnauthorized)
}

// Run keeps the views up to date until ctx ends: it watches the consent
// queue and the grants, and follows the audit trail.
func (s *Server) Run(ctx context.Context) error {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if err := s.cfg.Queue.Watch(ctx, poke); err != nil {
		return err
	}
	grantsChanged := make(chan struct{}, 1)
	if err := s.cfg.Grants.Watch(ctx, func(string) {
		select {
		case grantsChanged <- struct{}{}:
		default:
		}
	}); err != nil {
		return err
	}
	go s.feed.follow(ctx, s.cfg.AuditDir, s.log, s.cfg.Metrics)
	// Questions pass their deadline without a file changing: look every
	// second too, and sweep what dead brokers left.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastPending := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-grantsChanged:
			s.hub.publish(viewGrants, s.grantsEvent())
			continue
		case <-tick.C:
			s.cfg.Queue.Sweep(time.Now())
		}
		list, ids := s.pendingList()
		if ids == lastPending {
			continue
		}
		lastPending = ids
		s.hub.publish(viewAll, event{name: "pending", data: fmt.Sprint(len(list.Requests))})
		s.hub.publish(viewConsent, s.renderEvent("consent", "consent-list", list))
	}
}

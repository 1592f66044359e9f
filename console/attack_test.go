// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
)

// get sends a GET of path with the cookie and the headers h.
func (tc *testConsole) get(t *testing.T, cookie *http.Cookie, path string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, tc.base+path, nil)
	req.AddCookie(cookie)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

// TestConsoleRefusesOtherSitesReads attacks the reads a page of another
// port of this machine (same site: the SameSite cookie goes with its
// requests) can make the browser send: a trail search, a verification, an
// event stream. Marked same-site or cross-site by the browser, each gets 403
// and runs nothing; the address bar (none) and the console's own page
// (same-origin) are served.
func TestConsoleRefusesOtherSitesReads(t *testing.T) {
	tc := newTestConsole(t)
	var keys atomic.Int32
	tc.srv.cfg.Keys = func() (audit.VerifyKeys, error) {
		keys.Add(1)
		return audit.VerifyKeys{}, fmt.Errorf("no audit key in this test")
	}
	cookie := tc.login(t)
	for _, site := range []string{"same-site", "cross-site"} {
		for _, p := range []string{"/trail?search=1&path=hmac-sha256:00", "/trail", "/events?view=activity", "/consent", "/static/console.js"} {
			if resp, _ := tc.get(t, cookie, p, map[string]string{"Sec-Fetch-Site": site}); resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET %s marked %s: %s, want 403", p, site, resp.Status)
			}
		}
	}
	if n := keys.Load(); n != 0 {
		t.Errorf("refused reads verified the trail %d times", n)
	}
	for _, site := range []string{"none", "same-origin", ""} {
		if resp, body := tc.get(t, cookie, "/consent", map[string]string{"Sec-Fetch-Site": site}); resp.StatusCode != http.StatusOK {
			t.Errorf("GET /consent marked %q: %s, want 200: %s", site, resp.Status, body)
		}
	}
}

// TestConsoleVerifiesOnceForManyRequests attacks the verification in the
// trail view: many requests for a view whose verification is stale share
// one verification instead of running one each, in a row.
func TestConsoleVerifiesOnceForManyRequests(t *testing.T) {
	tc := newTestConsole(t)
	var keys atomic.Int32
	release := make(chan struct{})
	tc.srv.cfg.Keys = func() (audit.VerifyKeys, error) {
		keys.Add(1)
		<-release // a long verification
		return audit.VerifyKeys{}, fmt.Errorf("no audit key in this test")
	}
	cookie := tc.login(t)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if resp, body := tc.get(t, cookie, "/trail", nil); resp.StatusCode != http.StatusOK {
				t.Errorf("GET /trail: %s: %s", resp.Status, body)
			}
		})
	}
	wg.Wait() // each answered while the verification runs
	close(release)
	if n := keys.Load(); n != 1 {
		t.Errorf("20 requests for the trail view ran %d verifications, want 1 shared", n)
	}
}

// TestConsoleSearchesOneAtATime attacks the trail search's work: a search
// reads at most the console's budget of records and says it stopped, and
// searches run one at a time.
func TestConsoleSearchesOneAtATime(t *testing.T) {
	tc := newTestConsole(t)
	dir := filepath.Join(tc.state, "audit")
	w, err := audit.Open(dir, audit.WithStateDir(tc.state))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := w.Append(context.Background(), audit.Record{Kind: audit.KindDecision, DecisionID: fmt.Sprint("d", i), Server: "s", Method: "files/read",
			Paths: []string{fmt.Sprintf("proj/%d", i)}, Allow: audit.Bool(true)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tc.srv.searchBudget = 10
	v := tc.srv.search(context.Background(), filterForm{})
	if v.Read > 10 || !strings.Contains(v.Stopped, "10 records") {
		t.Errorf("a search over 40 records with a budget of 10: read %d, stopped %v, %q", v.Read, v.Stopped, v.Problem)
	}
	// While one search runs, another waits for it (and gives up with its
	// request).
	tc.srv.searching <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if v := tc.srv.search(ctx, filterForm{}); v.Read != 0 || !strings.Contains(v.Problem, "another search") {
		t.Errorf("a search while another runs: read %d, %q; want none read, waiting for the other", v.Read, v.Problem)
	}
	<-tc.srv.searching
}

// TestConsoleLimitsEventStreams attacks the event streams: past the limit,
// a stream is refused with 503 instead of held.
func TestConsoleLimitsEventStreams(t *testing.T) {
	tc := newTestConsole(t)
	cookie := tc.login(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tc.base+"/events?view=consent", nil)
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
		}
		return resp.StatusCode
	}
	for i := range maxStreams {
		if code := open(); code != http.StatusOK {
			t.Fatalf("stream %d: %d, want 200", i+1, code)
		}
	}
	if code := open(); code != http.StatusServiceUnavailable {
		t.Errorf("stream %d, past the limit: %d, want 503", maxStreams+1, code)
	}
}

// TestConsoleListenChecksTheBoundAddress attacks the plain-HTTP endpoint:
// one that binds a non-loopback address, whatever its name said, is
// refused.
func TestConsoleListenChecksTheBoundAddress(t *testing.T) {
	ep := Endpoint{Addr: "0.0.0.0:0", Loopback: true}
	ln, err := ep.Listen()
	if err == nil {
		ln.Close()
		t.Fatalf("a plain endpoint bound to %s was served", ln.Addr())
	}
	ep = Endpoint{Addr: net.JoinHostPort("localhost", "0"), Loopback: true}
	if ln, err := ep.Listen(); err != nil {
		t.Errorf("localhost: %v", err)
	} else {
		ln.Close()
	}
}

// TestConsoleRowsShowControlCharactersEscaped attacks the activity rows: a
// method and a detail holding a bidirectional override are shown escaped.
func TestConsoleRowsShowControlCharactersEscaped(t *testing.T) {
	tc := newTestConsole(t)
	rec := record{index: 1, rec: audit.Record{Kind: audit.KindDecision, Server: "s", Method: "files/read\u202e",
		Detail: "refused \u202etxt.exe", Time: time.Now().UTC().Format(audit.TimeLayout)}}
	ev := tc.srv.renderEvent("activity", "activity-row", rowOf(rec))
	if strings.Contains(ev.data, "\u202e") {
		t.Errorf("a row shows a bidirectional override as it is: %q", ev.data)
	}
	if !strings.Contains(ev.data, `\u202e`) {
		t.Errorf("a row does not show the override escaped: %q", ev.data)
	}
}

// TestConsoleCookieStaysWithTheConsole attacks the cookie's reach: cookies
// ignore ports, so a cookie for the whole host would go with the browser's
// requests to any server on this machine, another user's included. A
// browser's cookie jar (RFC 6265, as net/http/cookiejar keeps it) holding
// the console's cookie sends it to no other port's pages, nor to this
// console's own outside its prefix; the cookie is not the token, and
// the token is not the cookie.
func TestConsoleCookieStaysWithTheConsole(t *testing.T) {
	tc := newTestConsole(t)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := hc.Get(tc.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != tc.base+"/consent" {
		t.Fatalf("the URL with the token led to %s: %s", resp.Request.URL, resp.Status)
	}
	for _, other := range []string{"http://127.0.0.1:1/", "http://127.0.0.1:8080/consent", tc.origin + "/", tc.origin + "/consent", tc.origin + "/c/"} {
		u, _ := url.Parse(other)
		if cs := jar.Cookies(u); len(cs) != 0 {
			t.Errorf("the browser would send %s the console's cookie %v", other, cs)
		}
	}
	u, _ := url.Parse(tc.base + "/grants")
	cs := jar.Cookies(u)
	if len(cs) != 1 {
		t.Fatalf("the browser would send the console's own page %d cookies, want 1", len(cs))
	}
	token := strings.TrimPrefix(tc.srv.URL(), tc.base+"/?token=")
	if cs[0].Value == token {
		t.Errorf("the cookie is the token itself")
	}
	req, _ := http.NewRequest(http.MethodGet, tc.base+"/consent?token="+url.QueryEscape(cs[0].Value), nil)
	if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the cookie's value as the token: %s, want 401", resp.Status)
	}
	req, _ = http.NewRequest(http.MethodGet, tc.base+"/consent", nil)
	req.AddCookie(&http.Cookie{Name: tc.srv.cookie, Value: token})
	if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the token as the cookie: %s, want 401", resp.Status)
	}
	for _, p := range []string{"/consent", "/static/console.js", "/c/consent", "/"} {
		req, _ := http.NewRequest(http.MethodGet, tc.origin+p, nil)
		req.AddCookie(cs[0])
		if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s, outside the prefix, with the cookie: %s, want 401", p, resp.Status)
		}
	}
}

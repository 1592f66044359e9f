// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/grants"
)

// testConsole is a console on a state directory of the test's, served by
// httptest on loopback, with a grants store of that directory whose
// revocations the console's Revoke makes (and counts).
type testConsole struct {
	srv     *Server
	ts      *httptest.Server
	base    string // http://127.0.0.1:PORT/c/PREFIX: where the pages are
	origin  string // http://127.0.0.1:PORT
	state   string
	store   *grants.Store
	queue   *consent.Queue
	revokes atomic.Int32
}

func newTestConsole(t *testing.T) *testConsole {
	t.Helper()
	state := t.TempDir()
	queue, err := consent.OpenQueue(state)
	if err != nil {
		t.Fatal(err)
	}
	store, err := grants.Open(filepath.Join(state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ep, err := NewEndpoint("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	tc := &testConsole{state: state, store: store, queue: queue}
	tc.ts = httptest.NewUnstartedServer(nil)
	tc.srv, err = New(Config{
		StateDir: state, Queue: queue, Grants: store, AuditDir: filepath.Join(state, "audit"), Endpoint: ep,
		Keys: func() (audit.VerifyKeys, error) { return audit.VerifyKeys{}, errors.New("no audit key in this test") },
		Revoke: func(f grants.RevokeFilter) (Change, error) {
			tc.revokes.Add(1)
			gs, err := store.Revoke(f)
			return Change{Revoked: len(gs)}, err
		},
		Restore: func(f grants.RevokeFilter) (Change, error) {
			bs, err := store.Restore(f)
			return Change{Lifted: len(bs)}, err
		},
	}, tc.ts.Listener.Addr())
	if err != nil {
		t.Fatal(err)
	}
	tc.ts.Config.Handler = tc.srv
	tc.ts.Start()
	t.Cleanup(tc.ts.Close)
	tc.origin = tc.ts.URL
	tc.base, _, _ = strings.Cut(tc.srv.URL(), "/?token=")
	if !strings.HasPrefix(tc.base, tc.origin+"/c/") || len(tc.base) <= len(tc.origin+"/c/") {
		t.Fatalf("URL %s is not under a prefix on %s", tc.srv.URL(), tc.origin)
	}
	return tc
}

// client is an HTTP client that does not follow redirects, and gives up
// after 10 s (an event stream served without the token would never end).
func client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends a request and returns the response, its body read.
func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login opens the URL with the token and returns the cookie it sets.
func (tc *testConsole) login(t *testing.T) *http.Cookie {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, tc.srv.URL(), nil)
	resp, _ := do(t, req)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("the URL with the token: %s, cookies %v; want 303 and a cookie", resp.Status, resp.Cookies())
	}
	c := resp.Cookies()[0]
	if prefix := strings.TrimPrefix(tc.base, tc.origin); !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != prefix {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=%s", c, prefix)
	}
	if loc := resp.Header.Get("Location"); strings.Contains(loc, "token") {
		t.Errorf("the redirect keeps the token: %s", loc)
	}
	return c
}

// TestConsoleNeedsTheToken attacks the token: without it, with a wrong one
// in the URL, with a missing or wrong cookie, every page, asset and event
// stream answers 401 and no cookie is given; the right token gives the
// cookie, and the cookie the pages.
func TestConsoleNeedsTheToken(t *testing.T) {
	tc := newTestConsole(t)
	paths := []string{"/", "/consent", "/activity", "/grants", "/trail", "/events?view=consent", "/static/console.js", "/nothing"}
	token := strings.TrimPrefix(tc.srv.URL(), tc.base+"/?token=")
	wrong := []string{"", "x", token[:len(token)-1], token + "x", strings.ToUpper(token), url.QueryEscape(" " + token)}
	for _, p := range paths {
		req, _ := http.NewRequest(http.MethodGet, tc.base+p, nil)
		if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %s, want 401", p, resp.Status)
		}
		for _, w := range wrong {
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			req, _ := http.NewRequest(http.MethodGet, tc.base+p+sep+"token="+w, nil)
			if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
				t.Errorf("GET %s with the token %q: %s, cookies %v; want 401 and none", p, w, resp.Status, resp.Cookies())
			}
			req, _ = http.NewRequest(http.MethodGet, tc.base+p, nil)
			req.AddCookie(&http.Cookie{Name: tc.srv.cookie, Value: w})
			if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with the cookie %q: %s, want 401", p, w, resp.Status)
			}
		}
	}
	// The token in a POST's URL gives nothing either.
	req, _ := http.NewRequest(http.MethodPost, tc.srv.URL(), nil)
	req.Header.Set("Origin", tc.origin)
	if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("POST with the token: %s, cookies %v; want 401", resp.Status, resp.Cookies())
	}
	// Another console's cookie (another port) is not this one's.
	req, _ = http.NewRequest(http.MethodGet, tc.base+"/consent", nil)
	req.AddCookie(&http.Cookie{Name: "fsbroker-console-1", Value: token})
	if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET with the token under another console's cookie name: %s, want 401", resp.Status)
	}

	cookie := tc.login(t)
	for _, p := range []string{"/consent", "/activity", "/grants", "/trail", "/static/console.js"} {
		req, _ := http.NewRequest(http.MethodGet, tc.base+p, nil)
		req.AddCookie(cookie)
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the cookie: %s, want 200: %s", p, resp.Status, body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
	}
}

// TestConsoleRefusesOtherHosts attacks the Host check (DNS rebinding): a
// request with the right cookie whose Host names another site, or another
// port, is refused.
func TestConsoleRefusesOtherHosts(t *testing.T) {
	tc := newTestConsole(t)
	cookie := tc.login(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(tc.origin, "http://"))
	for _, host := range []string{"attacker.example:" + port, "attacker.example", "127.0.0.1:1", "localhost.attacker.example:" + port, "127.0.0.2:" + port} {
		req, _ := http.NewRequest(http.MethodGet, tc.base+"/consent", nil)
		req.Host = host
		req.AddCookie(cookie)
		if resp, _ := do(t, req); resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: %s, want 421", host, resp.Status)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "LOCALHOST:" + port} {
		req, _ := http.NewRequest(http.MethodGet, tc.base+"/consent", nil)
		req.Host = host
		req.AddCookie(cookie)
		if resp, _ := do(t, req); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %s, want 200", host, resp.Status)
		}
	}
}

// TestConsoleChangesNeedItsOwnOrigin attacks the CSRF defenses: a POST
// with the cookie but without an Origin, with another site's, with this
// machine's on another port, or marked cross-site by the browser changes
// nothing; the console's own origin does.
func TestConsoleChangesNeedItsOwnOrigin(t *testing.T) {
	tc := newTestConsole(t)
	cookie := tc.login(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(tc.origin, "http://"))
	post := func(origin, site string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, tc.base+"/grants/revoke", strings.NewReader("id=0123456789abcdef01234567"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		req.AddCookie(cookie)
		resp, _ := do(t, req)
		return resp
	}
	for _, c := range []struct{ origin, site string }{
		{"", ""}, {"null", ""}, {"http://attacker.example", ""}, {"http://127.0.0.1:1", ""}, {"http://localhost:1", "same-site"},
		{"https://127.0.0.1:" + port, ""}, {tc.origin, "cross-site"}, {tc.origin, "same-site"}, {tc.origin + "/x", ""},
	} {
		if resp := post(c.origin, c.site); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST with Origin %q, Sec-Fetch-Site %q: %s, want 403", c.origin, c.site, resp.Status)
		}
	}
	if n := tc.revokes.Load(); n != 0 {
		t.Fatalf("refused POSTs reached Revoke %d times", n)
	}
	if resp := post(tc.origin, "same-origin"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST from the console's own origin: %s, want 303", resp.Status)
	}
	if n := tc.revokes.Load(); n != 1 {
		t.Fatalf("the console's own POST reached Revoke %d times, want 1", n)
	}
}

// TestConsoleAnswerForNoRequest attacks the answer: an answer for a request
// id that does not exist, a malformed id, or a request answered already is
// refused, says so, and writes nothing in the queue.
func TestConsoleAnswerForNoRequest(t *testing.T) {
	tc := newTestConsole(t)
	cookie := tc.login(t)
	answer := func(form url.Values) string {
		req, _ := http.NewRequest(http.MethodPost, tc.base+"/consent/answer", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", tc.origin)
		req.AddCookie(cookie)
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("answer %v: %s %s", form, resp.Status, body)
		}
		return resp.Header.Get("Location")
	}
	for _, id := range []string{"00112233445566778899aabbccddeeff", "../../grants/x", ""} {
		if loc := answer(url.Values{"id": {id}, "answer": {"all"}}); !strings.Contains(loc, "error=gone") {
			t.Errorf("answer to %q: redirected to %s, want error=gone", id, loc)
		}
	}
	// A request answered (by another page) is not answered again.
	c, err := consent.NewConsole(tc.state, consent.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan consent.Decision, 1)
	go func() {
		d, _ := c.Ask(t.Context(), consent.Request{Server: consent.Server{ID: "notes", Name: "notes"}, Paths: []string{"proj/a", "proj/b"}})
		done <- d
	}()
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if rs, _ := tc.queue.Pending(time.Now()); len(rs) == 1 {
			id = rs[0].ID
		}
	}
	if id == "" {
		t.Fatal("the request did not reach the queue")
	}
	if loc := answer(url.Values{"id": {id}, "answer": {"checked"}, "path": {"proj/b"}}); !strings.Contains(loc, "done=answered") {
		t.Fatalf("the first answer: redirected to %s", loc)
	}
	if loc := answer(url.Values{"id": {id}, "answer": {"all"}}); !strings.Contains(loc, "error=gone") {
		t.Errorf("a second answer: redirected to %s, want error=gone", loc)
	}
	if d := <-done; len(d.Approved) != 1 || d.Approved[0] != "proj/b" {
		t.Errorf("the broker got %q, want the first answer's proj/b", d.Approved)
	}
	if des, _ := os.ReadDir(tc.queue.Dir()); len(des) != 0 {
		t.Errorf("the queue holds %d files after the answers", len(des))
	}
}

// TestConsoleNonLoopbackNeedsTLS: an address other than loopback is
// refused without a certificate (naming --tls-cert and --tls-key), and one
// of the pair alone is refused.
func TestConsoleNonLoopbackNeedsTLS(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "192.0.2.10:8443", "[::]:0", "example.com:443"} {
		_, err := NewEndpoint(listen, "", "")
		if !errors.Is(err, ErrNeedsTLS) || !strings.Contains(err.Error(), "--tls-cert") || !strings.Contains(err.Error(), "--tls-key") {
			t.Errorf("--listen %s without TLS: %v, want ErrNeedsTLS naming the flags", listen, err)
		}
	}
	for _, listen := range []string{"", ":0", "127.0.0.1:0", "localhost:0", "[::1]:0"} {
		if ep, err := NewEndpoint(listen, "", ""); err != nil || !ep.Loopback || ep.TLS != nil {
			t.Errorf("--listen %q: %+v, %v; want plain loopback", listen, ep, err)
		}
	}
	if _, err := NewEndpoint("0.0.0.0:0", "cert.pem", ""); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("--tls-cert alone: %v", err)
	}
	if _, err := NewEndpoint("0.0.0.0:0", "", "key.pem"); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("--tls-key alone: %v", err)
	}
	// The TLS side, served beyond loopback: TestConsoleServesTLSBeyondLoopback
	// (cmd/fsbroker), with a certificate of its own.
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// Environment variables of the console's browser tests.
const (
	// requireBrowserEnv set to 1 makes a missing Chromium a failure (CI),
	// not a skip.
	requireBrowserEnv = "FSBROKER_REQUIRE_BROWSER"
	// updateScreenshotsEnv set to 1 has the end-to-end test write the
	// screenshots of docs/console.md (docs/console/*.png).
	updateScreenshotsEnv = "FSBROKER_UPDATE_SCREENSHOTS"
)

// consoleProc is a running fsbroker console.
type consoleProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string // the address printed, with the token
	base   string // scheme://host:port/c/PREFIX: where the pages are
	origin string // scheme://host:port
	stderr *testlog.Lines
	exited chan struct{}
}

var consoleURL = regexp.MustCompile(`^fsbroker console: open ((https?://[^/ ]+)/c/[A-Za-z0-9_-]{22})/\?token=[A-Za-z0-9_-]{43}$`)

// startConsole runs fsbroker console with args and reads the address it
// prints.
func startConsole(t *testing.T, args ...string) *consoleProc {
	t.Helper()
	cmd := exec.Command(brokerBin, append([]string{"console"}, args...)...)
	cmd.Env = brokerEnv()
	c := &consoleProc{t: t, cmd: cmd, stderr: &testlog.Lines{}, exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.stop)
	select {
	case line, ok := <-lines:
		m := consoleURL.FindStringSubmatch(line)
		if !ok || m == nil {
			t.Fatalf("fsbroker console printed %q, want the address to open; stderr:\n%s", line, c.stderr)
		}
		c.url, c.base, c.origin = strings.TrimPrefix(line, "fsbroker console: open "), m[1], m[2]
	case <-time.After(waitLimit):
		t.Fatalf("fsbroker console printed no address within %v; stderr:\n%s", waitLimit, c.stderr)
	}
	go func() {
		for range lines {
			t.Errorf("fsbroker console printed a second line on stdout")
		}
	}()
	return c
}

// stop ends the console with SIGTERM and checks it exits 0, the race
// detector quiet.
func (c *consoleProc) stop() {
	t := c.t
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(waitLimit):
			t.Errorf("fsbroker console did not stop within %v of SIGTERM", waitLimit)
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("fsbroker console exited with status %d", code)
	}
	if strings.Contains(c.stderr.String(), "DATA RACE") {
		t.Errorf("the race detector fired in fsbroker console")
	}
	if t.Failed() {
		t.Logf("fsbroker console stderr:\n%s", c.stderr)
	}
}

// client is an HTTP client holding the console's cookie: it opened the
// address with the token.
func (c *consoleProc) client() *http.Client {
	c.t.Helper()
	jar := &cookieJar{}
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(jar.cookies) != 1 {
		c.t.Fatalf("the address with the token: %s, want 303 and the cookie", resp.Status)
	}
	return hc
}

// cookieJar keeps the one cookie of the console.
type cookieJar struct {
	mu      sync.Mutex
	cookies []*http.Cookie
}

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cookies = append(j.cookies, cs...)
}

func (j *cookieJar) Cookies(*url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.cookies)
}

// get fetches a page of the console and returns its status and body.
func (c *consoleProc) get(hc *http.Client, path string) (int, string) {
	c.t.Helper()
	resp, err := hc.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// browser is a headless Chromium tab, with every message of its console
// kept.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
}

// newBrowser starts Debian's Chromium, headless, with a tab. Without a
// Chromium the test is skipped, unless FSBROKER_REQUIRE_BROWSER=1 (CI),
// which makes it a failure.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv(requireBrowserEnv) == "1" {
			t.Fatalf("no Chromium (chromium, chromium-browser or google-chrome in PATH), and %s=1", requireBrowserEnv)
		}
		t.Skipf("no Chromium in PATH (apt-get install chromium): the console's browser tests need it; %s=1 makes this a failure", requireBrowserEnv)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium %s: %v", path, err)
	}
	b := &browser{ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.messages = append(b.messages, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs actions in the tab, each wait bounded.
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\npage:\n%s", what, err, b.page())
	}
}

// page is the page's HTML as it is now, for a failure message.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.documentElement.outerHTML`))
	if err != nil {
		return fmt.Sprintf("(cannot read it: %v)", err)
	}
	return html
}

// text returns the text of the first element sel matches.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// waitFor waits until the JavaScript expression is true, and returns when.
func (b *browser) waitFor(t *testing.T, what, expression string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expression, chromedp.WithPollingInterval(10*time.Millisecond))); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return time.Now()
}

// seenAt waits until the JavaScript expression is true, and returns when
// the page saw it (its own clock, polled every 10 ms): not when the answer
// reached the test.
func (b *browser) seenAt(t *testing.T, what, expression string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	ms, err := chromedp.Run(ctx, chromedp.Poll[float64]("("+expression+") && Date.now()", chromedp.WithPollingInterval(10*time.Millisecond)))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return time.UnixMilli(int64(ms))
}

// screenshot writes the page as docs/console/NAME.png when the screenshots
// are being made (FSBROKER_UPDATE_SCREENSHOTS=1).
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	if os.Getenv(updateScreenshotsEnv) != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	// No animation caught half way.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelectorAll('tr.new').forEach(r => r.classList.remove('new')), true`)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	out := filepath.Join("..", "..", "docs", "console", name+".png")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

// checkConsole fails the test on every error and exception the pages wrote
// to the browser's console.
func (b *browser) checkConsole(t *testing.T) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // the last messages on their way
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.messages {
		switch m.Type {
		case chromedp.ConsoleError, chromedp.ConsoleException:
			t.Errorf("the browser's console: %s (%s:%d)", m, m.URL, m.Line)
		default:
			t.Logf("the browser's console: %s", m)
		}
	}
}

// TestConsoleEndToEnd drives fsbroker console in a real headless Chromium
// beside a real broker (fsbroker stdio --consent console), the test playing
// its MCP server: the server asks consent for two paths (and a secret the
// policy removes); the person approves one by clicking in the page, and the
// server gets exactly that path. A refused read shows in the activity view,
// marked, within a second; a click on revoke refuses the server's next read
// within a second; the trail view finds the refusal and shows the trail
// intact. No page writes an error to the browser's console, and the console
// answers 401 to a request without the token. With
// FSBROKER_UPDATE_SCREENSHOTS=1 it writes docs/console/*.png.
func TestConsoleEndToEnd(t *testing.T) {
	b := newBrowser(t)
	w := newConsentWorld(t)
	c := startConsole(t, "--state-dir", w.state, "--root", w.proj, "--root", w.rw+":rw")
	if code, _ := c.get(&http.Client{}, "/consent"); code != http.StatusUnauthorized {
		t.Fatalf("a request without the token: %d, want 401", code)
	}
	p := startBroker(t, "", w.args("console")...)
	p.handshake("2025-11-25")

	b.do(t, "open the console", chromedp.Navigate(c.url), chromedp.WaitVisible(chromedp.CSS("#consent-list p.empty")))
	if u, _ := chromedp.Run(b.ctx, chromedp.Location()); strings.Contains(u, "token") {
		t.Errorf("the address bar still holds the token: %s", u)
	}

	// Consent: two paths asked, one approved by a click.
	id := p.Request("consent-1", "files/consent", map[string]any{
		"message":        "I index your notes.\nTwo files, please.",
		"requestedPaths": []string{"proj/a.txt", "proj/b.txt", "rw/.env"},
		"access":         "read",
	})
	b.do(t, "the request appears", chromedp.WaitVisible(chromedp.CSS("section.request")))
	shown := b.text(t, "section.request")
	for _, want := range []string{`"cli-test-peer"`, "UNVERIFIED", "proj/a.txt", "proj/b.txt", "rw/.env", "secrets", "I index your notes.", "read"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the request as shown lacks %q:\n%s", want, shown)
		}
	}
	if n := b.text(t, "#pending-count"); n != "1" {
		t.Errorf("the pending count shows %q, want 1", n)
	}
	b.screenshot(t, "consent")
	b.do(t, "approve proj/a.txt alone",
		chromedp.Click(chromedp.CSS(`section.request input[value="proj/a.txt"]`)),
		chromedp.Click(chromedp.CSS(`section.request button[value="checked"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")))
	reply := p.AwaitReply(id)
	if reply.Error != nil {
		t.Fatalf("files/consent: %s", reply.Raw)
	}
	var res map[string]any
	if err := json.Unmarshal(reply.Result, &res); err != nil {
		t.Fatal(err)
	}
	if granted, approved := decodeConsent(t, res); !granted || !slices.Equal(approved, []string{"proj/a.txt"}) {
		t.Fatalf("the server got %v, want exactly proj/a.txt", res)
	}
	if f := b.text(t, "p.flash"); !strings.Contains(f, "1 of 2") {
		t.Errorf("the page says %q after the answer", f)
	}
	csRead(t, p, "read-a", "proj/a.txt", "alpha")

	// Activity: a refusal appears, marked, as it is written.
	b.do(t, "open the activity view", chromedp.Navigate(c.base+"/activity"), chromedp.WaitVisible(chromedp.CSS("#activity-rows tr")))
	lateness := watchScheduling()
	csRefused(t, p, "read-b", "files/read", map[string]any{"path": "proj/b.txt"}, "PERMISSION_DENIED")
	answered := time.Now()
	seen := b.seenAt(t, "the refusal in the activity view",
		`Array.from(document.querySelectorAll('#activity-rows tr.refused')).some(r => r.textContent.includes('b.txt') && r.dataset.result === 'deny')`)
	late := lateness()
	t.Logf("the refusal showed in the activity view %v after its reply (scheduling lateness meanwhile: up to %v; bound %v)",
		seen.Sub(answered), late, latencyBound(late))
	if d := seen.Sub(answered); d > latencyBound(late) {
		t.Errorf("the refusal took %v to show (PROTOCOL.md: within a second; with the %v the load cost, %v)", d, latencyBound(late)-promisedLatency, latencyBound(late))
	}
	b.screenshot(t, "activity")

	// Grants: one click revokes, and the broker refuses the next read.
	b.do(t, "open the grants view", chromedp.Navigate(c.base+"/grants"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-path="proj/a.txt"] button.revoke`)))
	if g := b.text(t, `tr[data-path="proj/a.txt"]`); !strings.Contains(g, "cli-test-peer") || !strings.Contains(g, "console") {
		t.Errorf("the grant as shown: %q, want its server and by console", g)
	}
	b.screenshot(t, "grants")
	// The promise: a read sent more than a second after the click is
	// refused. So what is measured is when the last read still allowed was
	// sent, after the click (its reply's way back is not the promise's).
	type readOutcome struct {
		sent    time.Time
		refused bool
	}
	outcomes := make(chan readOutcome, 1024)
	stop := make(chan struct{})
	var reads sync.WaitGroup
	reads.Go(func() {
		defer close(outcomes)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rid := fmt.Sprintf("poll-%d", i)
			sent := time.Now()
			if csSend(p, rid, "files/read", map[string]any{"path": "proj/a.txt"}) != nil {
				return
			}
			m := p.TryAwait(waitLimit, func(m *message) bool { return m.IsReplyTo(`"` + rid + `"`) })
			if m == nil {
				return
			}
			outcomes <- readOutcome{sent: sent, refused: m.Error != nil}
			if m.Error != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	defer func() { close(stop); reads.Wait() }()
	lateness = watchScheduling()
	clicked := time.Now()
	b.do(t, "revoke the grant", chromedp.Click(chromedp.CSS(`tr[data-path="proj/a.txt"] button.revoke`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")))
	lastAllowed, refused := clicked, false
	for o := range outcomes {
		if o.refused {
			refused = true
			break
		}
		if o.sent.After(lastAllowed) {
			lastAllowed = o.sent
		}
	}
	late = lateness()
	if !refused {
		t.Fatalf("reads under the revoked grant were still answered %v after the click", waitLimit)
	}
	t.Logf("the last read allowed was sent %v after the click on revoke (scheduling lateness meanwhile: up to %v; bound %v)",
		lastAllowed.Sub(clicked), late, latencyBound(late))
	if d := lastAllowed.Sub(clicked); d > latencyBound(late) {
		t.Errorf("a read sent %v after the click was still allowed (PROTOCOL.md: refused within a second; with the %v the load cost, %v)",
			d, latencyBound(late)-promisedLatency, latencyBound(late))
	}
	if f := b.text(t, "p.flash"); !strings.Contains(f, "Revoked 1 grant") {
		t.Errorf("the page says %q after the revocation", f)
	}
	b.waitFor(t, "the grant gone from the page", `document.querySelector('tr[data-path="proj/a.txt"]') === null`)

	// The trail: the refusal found by a search; the trail intact.
	b.do(t, "search the trail", chromedp.Navigate(c.base+"/trail?search=1&result=deny&method=files%2Fread"),
		chromedp.WaitVisible(chromedp.CSS("#verify-summary")))
	if r := b.text(t, "#results"); !strings.Contains(r, "b.txt") || !strings.Contains(r, "PERMISSION_DENIED") {
		t.Errorf("the search's results lack the refusal:\n%s", r)
	}
	if v := b.text(t, "#verify-summary"); !strings.HasPrefix(v, "intact") {
		t.Errorf("the verification says %q, want intact", v)
	}
	b.screenshot(t, "trail")
	b.checkConsole(t)
}

// TestConsoleTrailSearchFindsRedactedPaths: where the broker keeps paths as
// keyed digests (--audit-redact-paths), the trail view finds a path's
// records by its digest, computed under the audit key as fsbroker audit hash
// does, and by the digest given as it is.
func TestConsoleTrailSearchFindsRedactedPaths(t *testing.T) {
	w := newConsentWorld(t)
	p := startBroker(t, "", w.args("auto", "--audit-redact-paths")...)
	p.handshake("2025-11-25")
	csConsent(t, p, 1, "read", "proj/a.txt")
	csRead(t, p, 2, "proj/a.txt", "alpha")
	target := filepath.Join(w.proj, "a.txt")
	digest, _, code := runFsbroker(t, nil, "audit", "hash", "--state-dir", w.state, target)
	if code != 0 {
		t.Fatalf("audit hash: exit %d", code)
	}
	digest = strings.TrimSpace(digest)
	c := startConsole(t, "--state-dir", w.state)
	hc := c.client()
	for _, q := range []url.Values{
		{"search": {"1"}, "path": {target}, "digest": {"on"}, "method": {"files/read"}},
		{"search": {"1"}, "path": {digest}, "method": {"files/read"}},
	} {
		code, body := c.get(hc, "/trail?"+q.Encode())
		if code != http.StatusOK || !strings.Contains(body, "1 record(s) match") || !strings.Contains(body, digest) {
			t.Errorf("search %v: %d, want the read's decision by its digest %s:\n%s", q, code, digest, body)
		}
	}
	// Without digest, the path itself is in no record.
	if _, body := c.get(hc, "/trail?"+url.Values{"search": {"1"}, "path": {target}}.Encode()); !strings.Contains(body, "0 record(s) match") {
		t.Errorf("a search by the plain path found records of a redacted trail")
	}
}

// TestConsoleServesTLSBeyondLoopback: with --tls-cert and --tls-key, a
// non-loopback --listen (every address) is served over TLS only: the
// address printed is https, the page answers there with the certificate,
// under its names, and plain HTTP gets no page.
func TestConsoleServesTLSBeyondLoopback(t *testing.T) {
	cert, key, pool := testCertificate(t)
	state := filepath.Join(realDir(t, t.TempDir()), "state")
	c := startConsole(t, "--state-dir", state, "--listen", "0.0.0.0:0", "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(c.url, "https://127.0.0.1:") {
		t.Fatalf("the address printed is %s, want https on 127.0.0.1", c.url)
	}
	hc := &http.Client{Timeout: waitLimit, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		Jar: &cookieJar{}}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(c.origin, "https://"))
	for _, base := range []string{c.base, "https://localhost:" + port + strings.TrimPrefix(c.base, c.origin)} {
		resp, err := hc.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp, err = hc.Get(base + "/grants")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil {
			t.Errorf("GET %s/grants over TLS with the cookie: %s", base, resp.Status)
		}
	}
	plain := &http.Client{Timeout: waitLimit}
	if resp, err := plain.Get("http://127.0.0.1:" + port + "/consent"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP: %s, want the TLS server's 400", resp.Status)
		}
	}
}

// TestConsoleRefusesWhatIsNotPrivate: fsbroker console exits 2 on a
// non-loopback --listen without TLS (naming --tls-cert and --tls-key), and
// on a state directory whose consent queue other users could write (so
// could a broker with --consent console).
func TestConsoleRefusesWhatIsNotPrivate(t *testing.T) {
	state := filepath.Join(realDir(t, t.TempDir()), "state")
	for _, listen := range []string{"0.0.0.0:0", "192.0.2.10:8443"} {
		// Bounded: a console that took the address would serve until stopped.
		ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
		cmd := exec.CommandContext(ctx, brokerBin, "console", "--state-dir", state, "--listen", listen)
		cmd.Env = brokerEnv()
		_, stderr, code := runExec(t, cmd)
		cancel()
		if code != exitUsage || !strings.Contains(stderr, "--tls-cert") || !strings.Contains(stderr, "--tls-key") {
			t.Errorf("--listen %s without TLS: exit %d, stderr %q; want 2 naming --tls-cert and --tls-key", listen, code, stderr)
		}
	}
	if _, err := consent.OpenQueue(state); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(state, consent.QueueDirName), 0o777); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runFsbroker(t, nil, "console", "--state-dir", state)
	if code != exitUsage || !strings.Contains(stderr, "0777") {
		t.Errorf("a queue open to others: exit %d, stderr %q; want 2 naming its mode", code, stderr)
	}
	root := realDir(t, filepath.Join(filepath.Dir(state), "proj"))
	_, stderr, code = runFsbroker(t, nil, "stdio", "--consent", "console", "--state-dir", state, "--root", root)
	if code != exitUsage || !strings.Contains(stderr, "--consent console") || !strings.Contains(stderr, "0777") {
		t.Errorf("a broker on a queue open to others: exit %d, stderr %q; want 2", code, stderr)
	}
}

// TestConsoleChangesShareOneSegment: the console's revocations and
// restores are recorded as fsbroker grants revoke and restore record theirs,
// in one segment of the trail for all of them (a process of the commands
// makes one change, and one segment, per run; the console is one process).
func TestConsoleChangesShareOneSegment(t *testing.T) {
	w := newConsentWorld(t)
	c := startConsole(t, "--state-dir", w.state, "--root", w.proj)
	hc := c.client()
	post := func(path string, form url.Values) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", c.origin)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Location")
	}
	segments := func() []string {
		names, _ := filepath.Glob(filepath.Join(w.state, "audit", "*.jsonl"))
		return names
	}
	before := len(segments())
	blockID := regexp.MustCompile(`id="block-([0-9a-f]+)"`)
	for i := range 3 {
		if loc := post("/grants/revoke", url.Values{"path": {"proj"}}); !strings.Contains(loc, "done=revoked") {
			t.Fatalf("revoke %d: redirected to %s", i+1, loc)
		}
		_, page := c.get(hc, "/grants")
		ids := blockID.FindAllStringSubmatch(page, -1)
		if len(ids) != 1 {
			t.Fatalf("blocks shown after revoke %d: %v", i+1, ids)
		}
		if loc := post("/grants/restore", url.Values{"id": {ids[0][1]}}); !strings.Contains(loc, "done=lifted") {
			t.Fatalf("restore %d: redirected to %s", i+1, loc)
		}
	}
	if made := len(segments()) - before; made != 1 {
		t.Errorf("six changes made %d segments, want 1", made)
	}
	var changes int
	for _, rec := range trailRecords(t, w.state) {
		if rec.Method == "grants/revoke" || rec.Method == "grants/restore" {
			changes++
		}
	}
	if changes != 6 {
		t.Errorf("the trail holds %d records of the changes, want 6 (3 blocks, 3 lifted)", changes)
	}
}

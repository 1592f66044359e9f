// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/fsbroker/fsbroker/internal/testlog"
)

// bundleServer is a real HTTP bundle server: it serves one bundle file at a time under
// /bundles/authz.tar.gz, with the bundle's revision as its ETag, answering 304 to a matching
// If-None-Match as OPA's protocol expects.
type bundleServer struct {
	*httptest.Server
	mu       sync.Mutex
	content  []byte
	etag     string
	requests int
}

func newBundleServer(t *testing.T) *bundleServer {
	s := &bundleServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests++
		if r.URL.Path != "/bundles/authz.tar.gz" || s.content == nil {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("If-None-Match") == s.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", s.etag)
		w.Header().Set("Content-Type", "application/gzip")
		w.Write(s.content)
	}))
	t.Cleanup(s.Close)
	return s
}

// serve makes b the bundle served from now on.
func (s *bundleServer) serve(t *testing.T, b bundle.Bundle, etag string) {
	t.Helper()
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.content, s.etag = buf.Bytes(), etag
	s.mu.Unlock()
}

// remoteConfig is an OPA configuration pulling authz from s every second, signed with keys.
func remoteConfig(t *testing.T, url string, keys signingKeys) []byte {
	t.Helper()
	return remoteConfigOf(t, url, keys, true, 1)
}

// remoteConfigOf is an OPA configuration pulling authz from url, polling every second after a
// success and backing off to maxDelay seconds after failures, with keys configured under the
// key id "fsbroker" and, when signing, a signing block naming it.
func remoteConfigOf(t *testing.T, url string, keys signingKeys, signing bool, maxDelay int) []byte {
	t.Helper()
	authz := map[string]any{
		"service":  "acme",
		"resource": "bundles/authz.tar.gz",
		"persist":  true,
		"polling":  map[string]any{"min_delay_seconds": 1, "max_delay_seconds": maxDelay},
	}
	if signing {
		authz["signing"] = map[string]any{"keyid": "fsbroker"}
	}
	c := map[string]any{
		"services": map[string]any{"acme": map[string]any{"url": url}},
		"bundles":  map[string]any{"authz": authz},
		"keys":     map[string]any{"fsbroker": map[string]any{"key": keys.public, "algorithm": keys.alg}},
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reloads collects the onReload calls of a Watch.
type reloads chan string

// record never blocks: a full channel (nobody awaiting) drops the report rather than stall
// the downloader, whose Stop waits for it.
func (r reloads) record(revision string, err error) {
	msg := revision
	if err != nil {
		msg = "error: " + err.Error()
	}
	select {
	case r <- msg:
	default:
	}
}

// await waits for a reload report that contains want, skipping others (a failed download is
// retried, and reported again, until the server has something new).
func (r reloads) await(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	var seen []string
	for {
		select {
		case got := <-r:
			if strings.Contains(got, want) {
				return
			}
			seen = append(seen, got)
		case <-deadline:
			t.Fatalf("no reload report saying %q within 20s; saw %q", want, seen)
		}
	}
}

func TestRemoteBundle(t *testing.T) {
	keys := hs256Keys()
	srv := newBundleServer(t)
	persist := t.TempDir()
	config := remoteConfig(t, srv.URL, keys)
	version := func(revision string, open bool, test string) bundle.Bundle {
		files := map[string]string{"authz.rego": bundlePolicy, "authz_test.rego": test}
		return makeBundle(t, revision, files, map[string]any{"fsbroker": map[string]any{"open": open}})
	}
	signed := func(revision string, open bool) bundle.Bundle {
		b := version(revision, open, bundleTest)
		keys.sign(t, &b)
		return b
	}
	in := testInput(t, "read", "proj/a", false)
	decides := func(e *Engine, revision string, allow bool) {
		t.Helper()
		d, err := e.Decide(context.Background(), in)
		if err != nil || d.Allow != allow || d.Revision != revision {
			t.Fatalf("Decide = %+v, %v; want allow=%v from revision %q", d, err, allow, revision)
		}
	}

	remote, err := ParseRemote(config, persist)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(context.Background(), Source{Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing pulled yet: every request is denied.
	if d, err := e.Decide(context.Background(), in); err == nil || d.Allow {
		t.Fatalf("before the first bundle: Decide = %+v, %v; want a fail-closed denial", d, err)
	}

	srv.serve(t, signed("r1", true), "r1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	got := make(reloads, 64)
	go func() { done <- e.Watch(ctx, got.record) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	got.await(t, "r1")
	decides(e, "r1", true)

	// A new revision replaces it.
	srv.serve(t, signed("r2", false), "r2")
	got.await(t, "r2")
	decides(e, "r2", false)

	// Refused downloads keep r2 deciding: unsigned, tampered after signing, signed with
	// another key, and a signed bundle whose tests fail.
	srv.serve(t, version("r3", true, bundleTest), "r3")
	got.await(t, "missing .signatures.json")
	decides(e, "r2", false)

	tampered := signed("r4", false)
	tampered.Data = map[string]any{"fsbroker": map[string]any{"open": true}}
	srv.serve(t, tampered, "r4")
	got.await(t, "digest mismatch")
	decides(e, "r2", false)

	forged := version("r5", true, bundleTest)
	other := hs256Keys()
	other.private = "not the fleet's key"
	other.sign(t, &forged)
	srv.serve(t, forged, "r5")
	got.await(t, "invalid HMAC signature")
	decides(e, "r2", false)

	failing := version("r6", true, "package fsbroker.authz_test\n\ntest_fails if false\n")
	keys.sign(t, &failing)
	srv.serve(t, failing, "r6")
	got.await(t, "test_fails")
	decides(e, "r2", false)

	// A good bundle again.
	srv.serve(t, signed("r7", true), "r7")
	got.await(t, "r7")
	decides(e, "r7", true)

	// A restart with the bundle server gone decides with the persisted r7.
	srv.Close()
	again, err := New(context.Background(), Source{Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	decides(again, "r7", true)
	if files, _ := filepath.Glob(filepath.Join(persist, "authz", "*")); len(files) != 1 {
		t.Errorf("persisted files = %q, want only bundle.tar.gz", files)
	}
}

func TestParseRemoteRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ config, want string }{
		"no bundle":        {`{"services": {"a": {"url": "http://x"}}}`, "no bundle is configured"},
		"two bundles":      {`{"services": {"a": {"url": "http://x"}}, "bundles": {"b1": {"service": "a", "resource": "x"}, "b2": {"service": "a", "resource": "y"}}}`, "exactly one bundle"},
		"unknown service":  {`{"services": {"a": {"url": "http://x"}}, "bundles": {"b": {"service": "nope", "resource": "x"}}}`, "nope"},
		"service no url":   {`{"services": {"a": {}}, "bundles": {"b": {"service": "a"}}}`, "no url"},
		"unknown key id":   {`{"services": {"a": {"url": "http://x"}}, "bundles": {"b": {"service": "a", "signing": {"keyid": "k"}}}}`, "key id k not found"},
		"bad key":          {`{"keys": {"k": {"algorithm": "HS256"}}, "services": {"a": {"url": "http://x"}}, "bundles": {"b": {"service": "a"}}}`, "keys"},
		"file resource":    {`{"bundles": {"b": {"resource": "file:///tmp/b.tar.gz"}}}`, "--bundle"},
		"not json":         {`services: {}`, "opa configuration"},
		"services not map": {`{"services": 3, "bundles": {"b": {}}}`, "services"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRemote([]byte(tc.config), "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseRemote = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	// Services as an array of named services, as OPA also accepts.
	r, err := ParseRemote([]byte(`{"services": [{"name": "a", "url": "http://x/"}], "bundles": {"b": {"service": "a", "resource": "p/b.tar.gz"}}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.String(); got != `bundle "b" from http://x/p/b.tar.gz` {
		t.Errorf("String = %q", got)
	}
	var le *LoadError
	if _, err := build(context.Background(), Source{Remote: r}, loadOptions{}); !errors.As(err, &le) {
		t.Errorf("build of a remote source = %v, want a *LoadError", err)
	}
}

// TestRemoteBundleSameRevisionNewContent: a bundle tool that keeps a static revision still
// gets its new content in force; and the source's name in logs carries no credentials.
func TestRemoteBundleSameRevisionNewContent(t *testing.T) {
	keys := hs256Keys()
	srv := newBundleServer(t)
	remote, err := ParseRemote(remoteConfig(t, srv.URL, keys), "")
	if err != nil {
		t.Fatal(err)
	}
	signed := func(open bool) bundle.Bundle {
		b := makeBundle(t, "static", map[string]string{"authz.rego": bundlePolicy}, map[string]any{"fsbroker": map[string]any{"open": open}})
		keys.sign(t, &b)
		return b
	}
	e, err := New(context.Background(), Source{Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	srv.serve(t, signed(true), "etag-1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	got := make(reloads, 64)
	go func() { done <- e.Watch(ctx, got.record) }()
	defer func() { cancel(); <-done }()
	got.await(t, "static")
	in := testInput(t, "read", "proj/a", false)
	if d, _ := e.Decide(context.Background(), in); !d.Allow {
		t.Fatalf("first content: %+v", d)
	}
	srv.serve(t, signed(false), "etag-2")
	got.await(t, "static")
	if d, _ := e.Decide(context.Background(), in); d.Allow {
		t.Errorf("the new content under the same revision was not put in force: %+v", d)
	}

	withSecrets, err := ParseRemote([]byte(`{"services": {"a": {"url": "https://user:pw@bundles.example.com/base?token=t1"}},
		"bundles": {"b": {"service": "a", "resource": "p/b.tar.gz?sig=s2"}}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if name := withSecrets.String(); strings.Contains(name, "pw") || strings.Contains(name, "t1") || strings.Contains(name, "s2") {
		t.Errorf("String() = %q leaks credentials", name)
	}
}

// requestCount is how many requests s has answered.
func (s *bundleServer) requestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// drainErrors counts the error reports waiting in r.
func (r reloads) drainErrors() int {
	n := 0
	for {
		select {
		case msg := <-r:
			if strings.HasPrefix(msg, "error: ") {
				n++
			}
		default:
			return n
		}
	}
}

// remoteWatch is an engine on a remote source, watching a bundle server, with its log and its
// reload reports.
type remoteWatch struct {
	srv *bundleServer
	log *testlog.Lines
	e   *Engine
	got reloads
}

// watchBundleServer starts a bundle server serving first (under its manifest revision as the
// ETag) and an engine watching it until the test ends, with keys configured (and a signing
// block naming them when signing) and polling.max_delay_seconds maxDelay.
func watchBundleServer(t *testing.T, keys signingKeys, signing bool, maxDelay int, first bundle.Bundle) *remoteWatch {
	t.Helper()
	w := &remoteWatch{srv: newBundleServer(t), log: &testlog.Lines{}, got: make(reloads, 64)}
	remote, err := ParseRemote(remoteConfigOf(t, w.srv.URL, keys, signing, maxDelay), "")
	if err != nil {
		t.Fatal(err)
	}
	if w.e, err = New(context.Background(), Source{Remote: remote}, WithLogger(w.log.Logger())); err != nil {
		t.Fatal(err)
	}
	w.srv.serve(t, first, first.Manifest.Revision)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.e.Watch(ctx, w.got.record) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// TestRemoteKeysWithoutSigningBlock: with keys configured and no signing block, OPA alone
// accepts an unsigned bundle; the broker refuses it, still takes a bundle signed by a
// configured key, and says in its log that a signature is required.
func TestRemoteKeysWithoutSigningBlock(t *testing.T) {
	t.Parallel()
	keys := hs256Keys()
	files := map[string]string{"authz.rego": bundlePolicy}
	open := map[string]any{"fsbroker": map[string]any{"open": true}}
	w := watchBundleServer(t, keys, false, 1, makeBundle(t, "unsigned", files, open))
	srv, log, e, got := w.srv, w.log, w.e, w.got

	got.await(t, "missing .signatures.json")
	in := testInput(t, "read", "proj/a", false)
	if d, err := e.Decide(context.Background(), in); err == nil || d.Allow || d.Revision == "unsigned" {
		t.Fatalf("after an unsigned bundle: Decide = %+v, %v; want the fail-closed denial, no policy loaded", d, err)
	}
	signed := makeBundle(t, "signed", files, open)
	keys.sign(t, &signed)
	srv.serve(t, signed, "signed")
	got.await(t, "signed")
	if d, err := e.Decide(context.Background(), in); err != nil || !d.Allow || d.Revision != "signed" {
		t.Fatalf("after a signed bundle: Decide = %+v, %v", d, err)
	}
	if log.Count("pulling policies", `signature="required (any configured key)"`) != 1 {
		t.Errorf("the start line does not say a signature is required:\n%s", log)
	}
}

// TestRemoteBadBundleBackoff: a bundle that is refused again and again is reported once (one
// error line, one onReload report, hence one audit record in the broker), retried with a
// growing delay rather than OPA's retries from 0.1 s (about 8 requests in 5 s), and its end is
// logged once with the count of failed attempts.
func TestRemoteBadBundleBackoff(t *testing.T) {
	t.Parallel()
	keys := hs256Keys()
	files := map[string]string{"authz.rego": bundlePolicy}
	open := map[string]any{"fsbroker": map[string]any{"open": true}}
	w := watchBundleServer(t, keys, true, 4, makeBundle(t, "r1", files, open)) // unsigned
	srv, log, got := w.srv, w.log, w.got

	got.await(t, "missing .signatures.json")
	first := srv.requestCount()
	time.Sleep(5 * time.Second)
	// Retries after 1.6 s and 2.6 s (20% jitter), then 4 s: at most 3 more in 5 s.
	if n := srv.requestCount() - first; n > 3 {
		t.Errorf("%d requests in the 5 s after the first refusal, want at most 3 (backoff from 1.6 s)", n)
	}
	if n := got.drainErrors(); n != 0 {
		t.Errorf("%d more failure reports for the same bundle, want none", n)
	}
	refusal := "policy reload failed"
	if n := log.Count("[ERROR]", refusal, "signatures"); n != 1 {
		t.Errorf("%d error lines for the unsigned bundle, want 1:\n%s", n, log)
	}
	if log.Count("[DEBUG]", "still refused", "signatures") == 0 {
		t.Errorf("the repeated refusals are not logged at debug level:\n%s", log)
	}

	// Another failure is news: reported and logged once more.
	tampered := makeBundle(t, "r2", files, open)
	keys.sign(t, &tampered)
	tampered.Data = map[string]any{"fsbroker": map[string]any{"open": false}}
	srv.serve(t, tampered, "r2")
	got.await(t, "digest mismatch")
	if n := log.Count("[ERROR]", refusal); n != 2 {
		t.Errorf("%d error lines after a second, different failure, want 2", n)
	}

	good := makeBundle(t, "r3", files, open)
	keys.sign(t, &good)
	srv.serve(t, good, "r3")
	got.await(t, "r3")
	if log.Count("[INFO]", "in force again", "failed_attempts=") != 1 {
		t.Errorf("the recovery is not logged once with the count of failed attempts:\n%s", log)
	}
}

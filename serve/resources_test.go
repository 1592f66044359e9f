// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/runtime"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// The resources tests run a Session in this process on a real runtime (the
// built-in policies, a real audit trail, grants store, executor and watch
// hub on a state directory in t.TempDir()), over real pipes, with the tests'
// MCP peer as the host; TestServeResourcesEndToEnd runs the real fsbroker
// serve instead.

// resourceSession is a Session under test and its host.
type resourceSession struct {
	*referenceClient
	sess  *Session
	state string
	init  map[string]any // the initialize result
}

// startResourceSession runs a session over the roots with the consent
// provider and limits (zero: the defaults), its state in state, and
// returns its host, initialized.
func startResourceSession(t *testing.T, state string, provider consent.Provider, limits runtime.Limits, specs ...roots.Spec) *resourceSession {
	t.Helper()
	rt, err := runtime.Open(context.Background(), runtime.Config{StateDir: state, Roots: specs, Consent: provider, Limits: limits}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	serverSide, hostSide := mcppeer.Pipes(t)
	sess, err := NewSession(serverSide, Config{Corridor: rt.NewCorridor(), Roots: rt.Roots, MaxReadBytes: limits.MaxReadBytes})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sess.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the session ended with %v", err)
		}
	})
	h := &resourceSession{sess: sess, state: state, referenceClient: &referenceClient{t: t,
		Peer: mcppeer.New(t, "fsbroker serve", hostSide, mcppeer.RequireValid(), mcppeer.WithFallback(mcppeer.MethodNotFound))}}
	resp := h.request("initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"resources-test","version":"0"}}`))
	if resp.Error != nil || json.Unmarshal(resp.Result, &h.init) != nil {
		t.Fatalf("initialize: %s", resp.Raw)
	}
	h.Notify("notifications/initialized", nil)
	return h
}

// rpc sends a request with params encoded as JSON and returns its reply.
func (p *referenceClient) rpc(method string, params any) *mcppeer.Message {
	p.t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.request(method, raw)
}

// result decodes the result of a reply into out; an error reply fails the
// test.
func (p *referenceClient) result(resp *mcppeer.Message, out any) {
	p.t.Helper()
	if resp.Error != nil {
		p.t.Fatalf("JSON-RPC error: %s", resp.Raw)
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		p.t.Fatalf("result %s: %v", resp.Result, err)
	}
}

// rpcErrorData is the data of a refusal.
type rpcErrorData struct {
	Code       string `json:"code"`
	Reason     string `json:"reason"`
	DecisionID string `json:"decisionId"`
	URI        string `json:"uri"`
}

// requireRPCError requires an error reply with the JSON-RPC code and
// data.code, and returns its data. A reply that holds file content fails.
func requireRPCError(t *testing.T, what string, resp *mcppeer.Message, code int, dataCode string) rpcErrorData {
	t.Helper()
	if resp.Error == nil {
		t.Fatalf("%s: got a result, want error %d %s: %s", what, code, dataCode, resp.Raw)
	}
	var data rpcErrorData
	if err := json.Unmarshal(resp.Error.Data, &data); err != nil {
		t.Fatalf("%s: error data %s: %v", what, resp.Error.Data, err)
	}
	if resp.Error.Code != code || data.Code != dataCode {
		t.Errorf("%s: error %d %s (%s), want %d %s", what, resp.Error.Code, data.Code, data.Reason, code, dataCode)
	}
	for _, secret := range []string{"hunter2", "outside secret", "PRIVATE KEY"} {
		if strings.Contains(resp.Raw, secret) {
			t.Errorf("%s: the refusal leaks content: %s", what, resp.Raw)
		}
	}
	return data
}

// resourceTree is the tree the resources tests serve: base/proj (the
// root) with text, media and binary files, names that need
// percent-encoding, secrets, links in and out, and enough files in many/
// for several pages; base/outside beside it.
type resourceTree struct {
	base, proj, outside string
	// files are the regular files a host may see, by path relative to
	// proj, with their content.
	files map[string]string
}

func newResourceTree(t *testing.T) resourceTree {
	t.Helper()
	base := testfs.RealDir(t, t.TempDir())
	rt := resourceTree{base: base, proj: filepath.Join(base, "proj"), outside: filepath.Join(base, "outside"),
		files: map[string]string{
			"a.txt":          "alpha\n",
			"space name.txt": "spaced\n",
			"100%.txt":       "percent\n",
			"q?#.txt":        "query and fragment\n",
			"über.md":        "# umlaut\n",
			"sub/b.md":       "# b\n",
			"sub/deep/c.go":  "package c\n",
			"img.png":        "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
			"bin.dat":        "\xff\xfe\x00binary\xc3",
			".gitignore":     "*.o\n",
		}}
	for n := range 150 {
		rt.files[fmt.Sprintf("many/f%03d.txt", n)] = fmt.Sprintf("file %d\n", n)
	}
	secrets := map[string]string{
		".env":              "API_KEY=hunter2\n",
		".ssh/id_ed25519":   "-----BEGIN OPENSSH PRIVATE KEY-----\n",
		"certs/server.pem":  "-----BEGIN PRIVATE KEY-----\n",
		"sub/.env.local":    "TOKEN=hunter2\n",
		"../outside/secret": "outside secret\n",
	}
	for name, content := range rt.files {
		writeTreeFile(t, filepath.Join(rt.proj, name), content)
	}
	for name, content := range secrets {
		writeTreeFile(t, filepath.Join(rt.proj, name), content)
	}
	if err := os.MkdirAll(filepath.Join(rt.proj, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link-in":  "a.txt",
		"link-out": filepath.Join(rt.outside, "secret"),
		"dir-out":  rt.outside,
	} {
		if err := os.Symlink(target, filepath.Join(rt.proj, link)); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

// writeTreeFile writes content to p, making its directory.
func writeTreeFile(t *testing.T, p, content string) {
	t.Helper()
	testfs.RealDir(t, filepath.Dir(p))
	testfs.WriteFile(t, p, content)
}

// uri is the file URI of a path relative to proj, as resources/list writes
// it.
func (rt resourceTree) uri(rel string) string { return FileURL(filepath.Join(rt.proj, rel)) }

// listedResource is one item of resources/list as received.
type listedResource struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MIMEType string `json:"mimeType"`
	Size     *int64 `json:"size"`
}

// listAllResources pages through resources/list and returns every
// resource, failing on a page over ResourcesPerPage.
func listAllResources(t *testing.T, p *referenceClient) (all []listedResource, pages int) {
	t.Helper()
	params := map[string]any{}
	for {
		var page struct {
			Resources  []listedResource `json:"resources"`
			NextCursor *string          `json:"nextCursor"`
		}
		p.result(p.rpc(MethodResourcesList, params), &page)
		pages++
		if len(page.Resources) > ResourcesPerPage {
			t.Errorf("page %d holds %d resources, over %d", pages, len(page.Resources), ResourcesPerPage)
		}
		all = append(all, page.Resources...)
		if page.NextCursor == nil {
			return all, pages
		}
		if *page.NextCursor == "" || pages > 100 {
			t.Fatalf("page %d: nextCursor %q", pages, *page.NextCursor)
		}
		params = map[string]any{"cursor": *page.NextCursor}
	}
}

// readResource reads uri and returns its one content item.
func readResource(t *testing.T, p *referenceClient, uri string) resourceContents {
	t.Helper()
	var res readResourceResult
	p.result(p.rpc(MethodResourcesRead, map[string]any{"uri": uri}), &res)
	if len(res.Contents) != 1 || res.Contents[0].URI != uri {
		t.Fatalf("read %s: %+v", uri, res)
	}
	return res.Contents[0]
}

// contentOf is the bytes of a content item.
func contentOf(t *testing.T, c resourceContents) []byte {
	t.Helper()
	switch {
	case c.Text != nil && c.Blob == nil:
		return []byte(*c.Text)
	case c.Blob != nil && c.Text == nil:
		b, err := base64.StdEncoding.DecodeString(*c.Blob)
		if err != nil {
			t.Fatalf("%s: blob: %v", c.URI, err)
		}
		return b
	}
	t.Fatalf("%s: want text or blob, got %+v", c.URI, c)
	return nil
}

// records returns the trail's records that match f.
func records(t *testing.T, state string, f audit.Filter) []audit.Record {
	t.Helper()
	var out []audit.Record
	for rec, err := range audit.Records(context.Background(), filepath.Join(state, "audit"), f) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// TestResourcesListEveryAllowedFileOnce pages through resources/list of a
// read-only root, with the real policies: every regular file the host may
// see is listed exactly once across several pages, with its URI, mount-
// relative name, MIME type and size; no secret (.env, .ssh, *.pem), no
// link (in or out of the root) and no directory is; each listed URI reads
// back the file's content. The first listing asked for consent (auto) and
// every listing is in the trail under the resources method.
func TestResourcesListEveryAllowedFileOnce(t *testing.T) {
	tree := newResourceTree(t)
	h := startResourceSession(t, filepath.Join(tree.base, "state"), consent.Auto{}, runtime.Limits{},
		roots.Spec{Path: tree.proj})
	all, pages := listAllResources(t, h.referenceClient)
	if pages < 2 {
		t.Errorf("%d files in %d page: the test wants several pages", len(all), pages)
	}
	seen := map[string]int{}
	for _, r := range all {
		seen[r.Name]++
		rel := strings.TrimPrefix(r.Name, "proj/")
		want, ok := tree.files[rel]
		if !ok {
			t.Errorf("listed %q (%s), which the host may not see or is no file", r.Name, r.URI)
			continue
		}
		if r.URI != tree.uri(rel) || r.Size == nil || *r.Size != int64(len(want)) || r.MIMEType != resourceMIMEType(rel) {
			t.Errorf("listed %+v, want uri %s, size %d, mimeType %s", r, tree.uri(rel), len(want), resourceMIMEType(rel))
		}
	}
	for rel := range tree.files {
		if n := seen["proj/"+rel]; n != 1 {
			t.Errorf("%s listed %d times, want once", rel, n)
		}
	}
	if seen["proj/img.png"] == 1 && resourceMIMEType("img.png") != "image/png" {
		t.Error("img.png is not listed as image/png")
	}
	for _, r := range all {
		if got := contentOf(t, readResource(t, h.referenceClient, r.URI)); string(got) != tree.files[strings.TrimPrefix(r.Name, "proj/")] {
			t.Errorf("%s reads %q", r.URI, got)
		}
	}
	if recs := records(t, h.state, audit.Filter{Tool: MethodResourcesList, Method: MethodResourcesList, Decision: "allow"}); len(recs) < pages {
		t.Errorf("%d allowing list decisions of resources/list in the trail, want at least %d", len(recs), pages)
	}
	if recs := records(t, h.state, audit.Filter{Kind: audit.KindConsent}); len(recs) == 0 {
		t.Error("the first listing asked for no consent")
	}
}

// TestResourcesListCursor: a cursor this session did not give (altered,
// made up, or another session's) is -32602 with data.code INVALID_PARAMS,
// recorded; so is a cursor on templates/list, which gives none.
func TestResourcesListCursor(t *testing.T) {
	tree := newResourceTree(t)
	state := filepath.Join(tree.base, "state")
	h := startResourceSession(t, state, consent.Auto{}, runtime.Limits{}, roots.Spec{Path: tree.proj, Preapproved: true})
	var page listResourcesResult
	h.result(h.rpc(MethodResourcesList, nil), &page)
	if page.NextCursor == "" {
		t.Fatal("no nextCursor on the first page")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(page.NextCursor, statePrefix))
	if err != nil {
		t.Fatal(err)
	}
	altered := bytes.Clone(raw)
	altered[len(altered)-1] ^= 1
	other := startResourceSession(t, filepath.Join(tree.base, "state2"), consent.Auto{}, runtime.Limits{}, roots.Spec{Path: tree.proj, Preapproved: true})
	for what, cursor := range map[string]any{
		"altered":         statePrefix + base64.RawURLEncoding.EncodeToString(altered),
		"made up":         "bWFkZSB1cA",
		"not base64":      "%%%",
		"not a string":    42,
		"another session": page.NextCursor,
	} {
		p := h.referenceClient
		if what == "another session" {
			p = other.referenceClient
		}
		requireRPCError(t, what, p.rpc(MethodResourcesList, map[string]any{"cursor": cursor}), -32602, "INVALID_PARAMS")
	}
	requireRPCError(t, "templates cursor", h.rpc(MethodResourceTemplatesList, map[string]any{"cursor": "x"}), -32602, "INVALID_PARAMS")
	if recs := records(t, state, audit.Filter{Method: MethodResourcesList, Decision: "deny", Code: "INVALID_PARAMS"}); len(recs) != 4 {
		t.Errorf("%d refusals of resources/list cursors in the trail, want 4", len(recs))
	}
}

// TestResourcesReadRefusesOutside: URIs that climb out of the root (.., its
// percent-encoded forms, encoded slashes), name another host, are relative
// or not file URIs, lie in a sibling-prefix directory, or go through a link
// out of the root are refused with an error that names the code, each
// recorded, no content sent; secrets are refused by the policy. The same
// file by other spellings of a local file URI is read.
func TestResourcesReadRefusesOutside(t *testing.T) {
	tree := newResourceTree(t)
	state := filepath.Join(tree.base, "state")
	writeTreeFile(t, tree.proj+"_evil/x", "outside secret\n")
	h := startResourceSession(t, state, consent.Auto{}, runtime.Limits{}, roots.Spec{Path: tree.proj})
	listAllResources(t, h.referenceClient) // the host's first listing: a grant on the root
	secret := filepath.Join(tree.outside, "secret")
	projURI := "file://" + tree.proj
	for _, c := range []struct {
		uri      string
		rpc      int
		dataCode string
	}{
		{projURI + "/../outside/secret", -32002, "PERMISSION_DENIED"},
		{projURI + "/%2e%2e/outside/secret", -32002, "PERMISSION_DENIED"},
		{projURI + "/sub/%2E%2E/%2e%2e/outside/secret", -32002, "PERMISSION_DENIED"},
		{projURI + "/%2e%2e%2foutside%2fsecret", -32003, "INVALID_PATH"},
		{projURI + "/sub%2F..%2F..%2Foutside/secret", -32003, "INVALID_PATH"},
		{projURI + "/%252e%252e/outside/secret", -32002, "FILE_NOT_FOUND"}, // decoded once: a name "%2e%2e"
		{projURI + "/sub/..%5c..%5coutside%5csecret", -32003, "INVALID_PATH"},
		{"file://" + secret, -32002, "PERMISSION_DENIED"},
		{"file://localhost" + secret, -32002, "PERMISSION_DENIED"},
		{"file://evilhost" + secret, -32002, "FILE_NOT_FOUND"},
		{"file://evilhost" + tree.proj + "/a.txt", -32002, "FILE_NOT_FOUND"},
		{"file://localhost:80" + tree.proj + "/a.txt", -32002, "FILE_NOT_FOUND"},
		{"file://user@localhost" + tree.proj + "/a.txt", -32002, "FILE_NOT_FOUND"},
		{"file:outside/secret", -32002, "FILE_NOT_FOUND"},
		{"proj/a.txt", -32002, "FILE_NOT_FOUND"},
		{"../outside/secret", -32002, "FILE_NOT_FOUND"},
		{secret, -32002, "FILE_NOT_FOUND"},
		{"https://example.com" + secret, -32002, "FILE_NOT_FOUND"},
		{"http://" + tree.proj + "/a.txt", -32002, "FILE_NOT_FOUND"},
		{"data:" + tree.proj + "/a.txt", -32002, "FILE_NOT_FOUND"},
		{"filex://" + tree.proj + "/a.txt", -32002, "FILE_NOT_FOUND"},
		{"file://" + tree.proj + "_evil/x", -32002, "PERMISSION_DENIED"},
		{projURI + "/link-out", -32002, "PERMISSION_DENIED"},
		{projURI + "/dir-out/secret", -32002, "PERMISSION_DENIED"},
		{projURI + "/.env", -32002, "PERMISSION_DENIED"},
		{projURI + "/sub/.env.local", -32002, "PERMISSION_DENIED"},
		{projURI + "/.ssh/id_ed25519", -32002, "PERMISSION_DENIED"},
		{projURI + "/certs/server.pem", -32002, "PERMISSION_DENIED"},
		{projURI + "/nope.txt", -32002, "FILE_NOT_FOUND"},
		{projURI + "/a.txt?x=1", -32003, "INVALID_PATH"},
	} {
		data := requireRPCError(t, c.uri, h.rpc(MethodResourcesRead, map[string]any{"uri": c.uri}), c.rpc, c.dataCode)
		if data.URI != c.uri || data.DecisionID == "" {
			t.Errorf("%s: data %+v: want the uri and a decision id", c.uri, data)
		}
		// Refused: a denying decision; a file found missing once decided: its
		// outcome.
		recs := records(t, state, audit.Filter{DecisionID: data.DecisionID})
		if n := len(recs); n == 0 || recs[n-1].Tool != MethodResourcesRead ||
			recs[n-1].Code != c.dataCode && recs[n-1].Outcome != c.dataCode {
			t.Errorf("%s: records %+v, want the last of %s to say %s", c.uri, recs, MethodResourcesRead, c.dataCode)
		}
		if strings.Contains(c.uri, ".env") && !strings.HasPrefix(data.Reason, "secrets:") {
			t.Errorf("%s: reason %q, want the secrets rule", c.uri, data.Reason)
		}
	}
	for _, uri := range []string{
		projURI + "/a.txt",
		"file://localhost" + tree.proj + "/a.txt",
		"FILE://LOCALHOST" + tree.proj + "/a.txt",
		"file:" + tree.proj + "/a.txt",
		projURI + "/sub/../a.txt",
		projURI + "/sub/%2e%2e/a.txt",
		projURI + "/%61.txt",
		projURI + "/link-in",
	} {
		if got := contentOf(t, readResource(t, h.referenceClient, uri)); string(got) != "alpha\n" {
			t.Errorf("%s reads %q", uri, got)
		}
	}
	for _, params := range []any{nil, map[string]any{}, map[string]any{"uri": 7}, map[string]any{"uri": ""}, []any{"x"}} {
		requireRPCError(t, fmt.Sprint(params), h.rpc(MethodResourcesRead, params), -32602, "INVALID_PARAMS")
	}
}

// TestResourcesReadContent: text is text/plain, media of read_media_file's
// table and content that is not UTF-8 are base64 blobs of their type, a
// file larger than the read limit is read whole in several corridor reads,
// all from a read-only root, each read recorded under resources/read.
func TestResourcesReadContent(t *testing.T) {
	tree := newResourceTree(t)
	state := filepath.Join(tree.base, "state")
	big := strings.Repeat("0123456789abcdef", 1000)
	testfs.WriteFile(t, filepath.Join(tree.proj, "big.txt"), big)
	limits := runtime.DefaultLimits()
	limits.MaxReadBytes = 4096
	h := startResourceSession(t, state, consent.Auto{}, limits, roots.Spec{Path: tree.proj, Preapproved: true})
	for rel, want := range map[string]struct {
		mime string
		text bool
	}{
		"a.txt":   {"text/plain", true},
		"über.md": {"text/plain", true},
		"img.png": {"image/png", false},
		"bin.dat": {"application/octet-stream", false},
		"big.txt": {"text/plain", true},
	} {
		c := readResource(t, h.referenceClient, tree.uri(rel))
		content, ok := tree.files[rel]
		if !ok {
			content = big
		}
		if c.MIMEType != want.mime || (c.Text != nil) != want.text || string(contentOf(t, c)) != content {
			t.Errorf("%s: %s text=%v, want %s text=%v and the file's content", rel, c.MIMEType, c.Text != nil, want.mime, want.text)
		}
	}
	reads := records(t, state, audit.Filter{Tool: MethodResourcesRead, Method: MethodResourcesRead, Decision: "allow"})
	if len(reads) < 5+len(big)/4096 {
		t.Errorf("%d read decisions, want the big file read in chunks of 4096 bytes", len(reads))
	}
}

// TestResourcesConsent: a read of a path no grant covers asks the consent
// provider: deny leaves it refused (and resources/list empty), auto
// approves it once and it is read.
func TestResourcesConsent(t *testing.T) {
	tree := newResourceTree(t)
	denied := startResourceSession(t, filepath.Join(tree.base, "state-deny"), consent.Deny{}, runtime.Limits{}, roots.Spec{Path: tree.proj})
	data := requireRPCError(t, "denied read", denied.rpc(MethodResourcesRead, map[string]any{"uri": tree.uri("a.txt")}), -32002, "PERMISSION_DENIED")
	if !strings.Contains(data.Reason, "consent") {
		t.Errorf("reason %q, want one naming consent", data.Reason)
	}
	if all, _ := listAllResources(t, denied.referenceClient); len(all) != 0 {
		t.Errorf("resources/list without consent shows %d resources", len(all))
	}
	state := filepath.Join(tree.base, "state-auto")
	approved := startResourceSession(t, state, consent.Auto{}, runtime.Limits{}, roots.Spec{Path: tree.proj})
	if got := contentOf(t, readResource(t, approved.referenceClient, tree.uri("sub/b.md"))); string(got) != "# b\n" {
		t.Errorf("read %q", got)
	}
	if recs := records(t, state, audit.Filter{Kind: audit.KindConsent}); len(recs) != 1 {
		t.Errorf("%d consent records, want 1", len(recs))
	}
}

// updates returns the uris of the notifications/resources/updated received
// so far.
func updates(p interface{ All() []*mcppeer.Message }) []string {
	var out []string
	for _, m := range p.All() {
		if m.IsNotification(NotificationResourceUpdated) {
			var params struct {
				URI string `json:"uri"`
			}
			_ = json.Unmarshal(m.Params, &params)
			out = append(out, params.URI)
		}
	}
	return out
}

// awaitUpdate waits for the next notifications/resources/updated and
// requires it to name uri.
func awaitUpdate(t *testing.T, p *referenceClient, uri string) {
	t.Helper()
	m := p.AwaitNotification(NotificationResourceUpdated)
	if !strings.Contains(string(m.Params), fmt.Sprintf("%q", uri)) {
		t.Fatalf("update %s, want one for %s", m.Params, uri)
	}
}

// requireEmpty requires a {} result.
func requireEmpty(t *testing.T, what string, resp *mcppeer.Message) {
	t.Helper()
	if resp.Error != nil || string(resp.Result) != "{}" {
		t.Fatalf("%s: %s, want {}", what, resp.Raw)
	}
}

// TestResourcesSubscribe: a file changed on disk by another writer gives
// one notifications/resources/updated with the subscribed uri (a second
// subscription's change, made after, arrives after it and nothing more
// for the first came); a second subscribe to the same uri holds the same
// watch; after unsubscribe nothing comes; subscriptions to a secret, a path
// outside, a link out and a missing file are refused and hold no watch; an
// unknown uri cannot be unsubscribed.
func TestResourcesSubscribe(t *testing.T) {
	tree := newResourceTree(t)
	h := startResourceSession(t, filepath.Join(tree.base, "state"), consent.Auto{}, runtime.Limits{}, roots.Spec{Path: tree.proj, Preapproved: true})
	if caps, _ := h.init["capabilities"].(map[string]any); fmt.Sprint(caps["resources"]) != "map[listChanged:false subscribe:true]" {
		t.Fatalf("capabilities %v", h.init["capabilities"])
	}
	a, b := tree.uri("a.txt"), tree.uri("sub/b.md")
	requireEmpty(t, "subscribe a", h.rpc(MethodResourcesSubscribe, map[string]any{"uri": a}))
	requireEmpty(t, "subscribe a again", h.rpc(MethodResourcesSubscribe, map[string]any{"uri": a}))
	requireEmpty(t, "subscribe b", h.rpc(MethodResourcesSubscribe, map[string]any{"uri": b}))
	if n := h.sess.cfg.Corridor.Stats().Watches; n != 2 {
		t.Errorf("%d watches for two subscriptions", n)
	}
	testfs.WriteFile(t, filepath.Join(tree.proj, "a.txt"), "changed\n")
	awaitUpdate(t, h.referenceClient, a)
	testfs.WriteFile(t, filepath.Join(tree.proj, "sub/b.md"), "changed\n")
	awaitUpdate(t, h.referenceClient, b)
	if got := updates(h.referenceClient); !slices.Equal(got, []string{a, b}) {
		t.Errorf("updates %q, want one for a, then one for b", got)
	}

	requireEmpty(t, "unsubscribe a", h.rpc(MethodResourcesUnsubscribe, map[string]any{"uri": a}))
	testfs.WriteFile(t, filepath.Join(tree.proj, "a.txt"), "changed again\n")
	testfs.WriteFile(t, filepath.Join(tree.proj, "sub/b.md"), "changed again\n")
	awaitUpdate(t, h.referenceClient, b)
	if got := updates(h.referenceClient); !slices.Equal(got, []string{a, b, b}) {
		t.Errorf("updates %q: a change after unsubscribe was announced", got)
	}
	requireRPCError(t, "unsubscribe a twice", h.rpc(MethodResourcesUnsubscribe, map[string]any{"uri": a}), -32602, "INVALID_PARAMS")

	for uri, code := range map[string]string{
		tree.uri(".env"):                          "PERMISSION_DENIED",
		tree.uri(".ssh/id_ed25519"):               "PERMISSION_DENIED",
		tree.uri("link-out"):                      "PERMISSION_DENIED",
		"file://" + tree.outside + "/secret":      "PERMISSION_DENIED",
		"file://" + tree.proj + "/%2e%2e/outside": "PERMISSION_DENIED",
		"file://evilhost" + tree.proj + "/a.txt":  "FILE_NOT_FOUND",
		tree.uri("nope.txt"):                      "FILE_NOT_FOUND",
	} {
		requireRPCError(t, "subscribe "+uri, h.rpc(MethodResourcesSubscribe, map[string]any{"uri": uri}), -32002, code)
	}
	if n := h.sess.cfg.Corridor.Stats().Watches; n != 1 {
		t.Errorf("%d watches, want b's alone", n)
	}
	testfs.WriteFile(t, filepath.Join(tree.proj, ".env"), "API_KEY=changed\n")
	testfs.WriteFile(t, filepath.Join(tree.proj, "sub/b.md"), "changed a third time\n")
	awaitUpdate(t, h.referenceClient, b)
	if got := updates(h.referenceClient); len(got) != 4 {
		t.Errorf("updates %q", got)
	}
}

// TestResourcesSubscribeLimit: subscriptions count against the session's
// watch limit: past it QUOTA_EXCEEDED (-32007); a repeated subscribe takes
// no place; an unsubscribe frees one.
func TestResourcesSubscribeLimit(t *testing.T) {
	tree := newResourceTree(t)
	limits := runtime.DefaultLimits()
	limits.MaxWatches = 2
	h := startResourceSession(t, filepath.Join(tree.base, "state"), consent.Auto{}, limits, roots.Spec{Path: tree.proj, Preapproved: true})
	for _, rel := range []string{"a.txt", "sub/b.md", "a.txt"} {
		requireEmpty(t, "subscribe "+rel, h.rpc(MethodResourcesSubscribe, map[string]any{"uri": tree.uri(rel)}))
	}
	requireRPCError(t, "third", h.rpc(MethodResourcesSubscribe, map[string]any{"uri": tree.uri("sub/deep/c.go")}), -32007, "QUOTA_EXCEEDED")
	requireEmpty(t, "unsubscribe", h.rpc(MethodResourcesUnsubscribe, map[string]any{"uri": tree.uri("a.txt")}))
	requireEmpty(t, "third after", h.rpc(MethodResourcesSubscribe, map[string]any{"uri": tree.uri("sub/deep/c.go")}))
}

// approvals is a real consent program (--consent command:PROG): a script
// that approves, of the paths asked for, those its file lists now.
type approvals struct {
	t      *testing.T
	script string
	file   string
}

// newApprovals writes the program and its file, approving paths.
func newApprovals(t *testing.T, dir string, paths ...string) *approvals {
	t.Helper()
	a := &approvals{t: t, script: filepath.Join(dir, "approve.sh"), file: filepath.Join(dir, "approved.json")}
	if err := os.WriteFile(a.script, []byte("#!/bin/sh\ncat >/dev/null\ncat \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a.set(paths...)
	return a
}

// set makes paths the ones approved from now on.
func (a *approvals) set(paths ...string) {
	a.t.Helper()
	data, err := json.Marshal(append([]string{}, paths...))
	if err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(a.file, data, 0o644); err != nil {
		a.t.Fatal(err)
	}
}

// provider is the program as a consent provider.
func (a *approvals) provider() consent.Provider {
	a.t.Helper()
	c, err := consent.NewCommand(a.script, []string{a.file})
	if err != nil {
		a.t.Fatal(err)
	}
	return c
}

// spec is the program as --consent's value.
func (a *approvals) spec() string { return "command:" + a.script + " " + a.file }

// awaitRefused waits until a read of uri is refused: the session has seen
// a revocation (its grants store's cache is at most 500 ms stale).
func awaitRefused(t *testing.T, p *referenceClient, uri string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.rpc(MethodResourcesRead, map[string]any{"uri": uri}).Error == nil {
		if time.Now().After(deadline) {
			t.Fatal("the revocation was never seen")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestResourcesSubscriptionRevoked: once another process revokes the grant
// a subscription was consented under, a change of its file is never
// announced (the watch ends), while a subscription under another grant
// goes on; the host may still unsubscribe.
func TestResourcesSubscriptionRevoked(t *testing.T) {
	tree := newResourceTree(t)
	state := filepath.Join(tree.base, "state")
	approve := newApprovals(t, tree.base, "proj/a.txt", "proj/sub/b.md")
	h := startResourceSession(t, state, approve.provider(), runtime.Limits{}, roots.Spec{Path: tree.proj})
	a, b := tree.uri("a.txt"), tree.uri("sub/b.md")
	for _, uri := range []string{a, b} {
		requireEmpty(t, "subscribe "+uri, h.rpc(MethodResourcesSubscribe, map[string]any{"uri": uri}))
	}
	testfs.WriteFile(t, filepath.Join(tree.proj, "a.txt"), "changed\n")
	awaitUpdate(t, h.referenceClient, a)

	other, err := grants.Open(filepath.Join(state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	approve.set("proj/sub/b.md")
	if revoked, err := other.Revoke(grants.RevokeFilter{Path: "proj/a.txt"}); err != nil || len(revoked) != 1 {
		t.Fatalf("revoke: %v %v", revoked, err)
	}
	// The session sees the revocation (its reads are refused) before the
	// file changes again.
	awaitRefused(t, h.referenceClient, a)
	testfs.WriteFile(t, filepath.Join(tree.proj, "a.txt"), "changed after the revocation\n")
	testfs.WriteFile(t, filepath.Join(tree.proj, "sub/b.md"), "changed\n")
	awaitUpdate(t, h.referenceClient, b)
	if got := updates(h.referenceClient); !slices.Equal(got, []string{a, b}) {
		t.Errorf("updates %q: a change under the revoked grant was announced", got)
	}
	if n := h.sess.cfg.Corridor.Stats().Watches; n != 1 {
		t.Errorf("%d watches, want the revoked one ended", n)
	}
	requireEmpty(t, "unsubscribe the ended one", h.rpc(MethodResourcesUnsubscribe, map[string]any{"uri": a}))
}

// TestResourcesTemplates: one template, file:///{+path}.
func TestResourcesTemplates(t *testing.T) {
	tree := newResourceTree(t)
	h := startResourceSession(t, filepath.Join(tree.base, "state"), consent.Deny{}, runtime.Limits{}, roots.Spec{Path: tree.proj})
	var res struct {
		ResourceTemplates []map[string]string `json:"resourceTemplates"`
		NextCursor        *string             `json:"nextCursor"`
	}
	h.result(h.rpc(MethodResourceTemplatesList, map[string]any{}), &res)
	if len(res.ResourceTemplates) != 1 || res.ResourceTemplates[0]["uriTemplate"] != "file:///{+path}" ||
		res.ResourceTemplates[0]["name"] == "" || res.ResourceTemplates[0]["description"] == "" || res.NextCursor != nil {
		t.Errorf("templates %+v", res)
	}
}

// TestServeResourcesEndToEnd runs the real fsbroker serve over pipes: its
// resources are listed, read and subscribed to; a write by this process
// (another writer than the broker) is announced once; a secret is hidden
// and refused with its code; `fsbroker grants revoke`, a third process,
// quiets the subscription it covered; the trail holds the records under
// the resources methods.
func TestServeResourcesEndToEnd(t *testing.T) {
	tree := newResourceTree(t)
	state := filepath.Join(tree.base, "state")
	approve := newApprovals(t, tree.base, "proj")
	p := startServe(t, state, "--root", tree.proj, "--consent", approve.spec())
	all, _ := listAllResources(t, p)
	if len(all) != len(tree.files) {
		t.Errorf("%d resources listed, want %d", len(all), len(tree.files))
	}
	for _, r := range all {
		if strings.Contains(r.Name, ".env") || strings.Contains(r.Name, "link") {
			t.Errorf("listed %s", r.Name)
		}
	}
	if got := contentOf(t, readResource(t, p, tree.uri("space name.txt"))); string(got) != "spaced\n" {
		t.Errorf("read %q", got)
	}
	data := requireRPCError(t, ".env", p.rpc(MethodResourcesRead, map[string]any{"uri": tree.uri(".env")}), -32002, "PERMISSION_DENIED")
	if !strings.HasPrefix(data.Reason, "secrets:") {
		t.Errorf("reason %q", data.Reason)
	}
	a, b := tree.uri("a.txt"), tree.uri("many/f000.txt")
	for _, uri := range []string{a, b} {
		requireEmpty(t, "subscribe", p.rpc(MethodResourcesSubscribe, map[string]any{"uri": uri}))
	}
	testfs.WriteFile(t, filepath.Join(tree.proj, "a.txt"), "changed\n")
	awaitUpdate(t, p, a)
	testfs.WriteFile(t, filepath.Join(tree.proj, "many/f000.txt"), "changed\n")
	awaitUpdate(t, p, b)

	// The listing granted the whole root: revoke it, then approve f000 alone
	// (a subscription asks for its file).
	approve.set("proj/many/f000.txt")
	revoke := exec.Command(brokerBinary(t), "grants", "revoke", "--state-dir", state, "--path", "proj")
	if out, err := revoke.CombinedOutput(); err != nil {
		t.Fatalf("fsbroker grants revoke: %v\n%s", err, out)
	}
	awaitRefused(t, p, a)
	requireEmpty(t, "unsubscribe b", p.rpc(MethodResourcesUnsubscribe, map[string]any{"uri": b}))
	requireEmpty(t, "subscribe b again", p.rpc(MethodResourcesSubscribe, map[string]any{"uri": b}))
	testfs.WriteFile(t, filepath.Join(tree.proj, "a.txt"), "changed after the revocation\n")
	testfs.WriteFile(t, filepath.Join(tree.proj, "many/f000.txt"), "changed again\n")
	awaitUpdate(t, p, b)
	if got := updates(p); !slices.Equal(got, []string{a, b, b}) {
		t.Errorf("updates %q", got)
	}
	for _, f := range []audit.Filter{
		{Tool: MethodResourcesList, Method: MethodResourcesList, Decision: "allow"},
		{Tool: MethodResourcesRead, Method: MethodResourcesRead, Decision: "allow"},
		{Tool: MethodResourcesRead, Method: MethodResourcesRead, Decision: "deny", Code: "PERMISSION_DENIED"},
		{Tool: MethodResourcesSubscribe, Method: MethodResourcesSubscribe, Decision: "allow"},
	} {
		if len(records(t, state, f)) == 0 {
			t.Errorf("no record %+v in the trail", f)
		}
	}
	if u, err := url.Parse(tree.uri("100%.txt")); err != nil || u.Path != filepath.Join(tree.proj, "100%.txt") {
		t.Errorf("the listed uri of 100%%.txt does not parse back: %v %v", u, err)
	}
}

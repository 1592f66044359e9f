// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package streamable

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// The attacks of a local process that does not hold the token (review 19,
// findings 1 and 9): every request is refused 401 before its body is read
// or a session opened, and neither a slow body nor a held event stream
// keeps a real client out.

// TestHTTPRefusesRequestsWithoutTheToken: a request with no Authorization
// header, another scheme, another token (a character more or less, the
// token twice, the right one beside a wrong one) gets 401 with a Bearer
// challenge, whatever its method, and opens no session; with a real
// session's id it reaches nothing either. The scheme's case does not
// matter.
func TestHTTPRefusesRequestsWithoutTheToken(t *testing.T) {
	ep := startEndpoint(t)
	c := newRawClient(t, ep)
	c.initialize()
	opened := ep.opened.Load()
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-code","version":"1"}}}`
	for _, auth := range [][]string{
		nil,
		{""},
		{"Bearer"},
		{"Bearer "},
		{"Basic " + ep.token},
		{ep.token},
		{"Bearer " + ep.token + "x"},
		{"Bearer " + ep.token[:len(ep.token)-1]},
		{"Bearer " + ep.token + " " + ep.token},
		{"Bearer " + NewToken()},
		{"Bearer " + ep.token, "Bearer " + NewToken()},
	} {
		for _, req := range []struct {
			method, session, body string
		}{
			{http.MethodPost, "", init},
			{http.MethodPost, c.session, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"announce","arguments":{}}}`},
			{http.MethodGet, c.session, ""},
			{http.MethodDelete, c.session, ""},
		} {
			r, err := http.NewRequest(req.method, ep.url, strings.NewReader(req.body))
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			if req.session != "" {
				r.Header.Set(headerSessionID, req.session)
			}
			for _, a := range auth {
				r.Header.Add("Authorization", a)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			resp, err := http.DefaultClient.Do(r.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusUnauthorized {
				_, _ = io.Copy(io.Discard, resp.Body)
			}
			resp.Body.Close() // without reading what else it is: an event stream has no end
			cancel()
			challenge := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer ") || resp.Header.Get(headerSessionID) != "" {
				t.Errorf("%s with Authorization %q: %s, WWW-Authenticate %q, session id %q; want 401 with a Bearer challenge and no session",
					req.method, auth, resp.Status, challenge, resp.Header.Get(headerSessionID))
			}
			if invalid := strings.Contains(challenge, `error="invalid_token"`); invalid != (len(auth) > 0) {
				t.Errorf("Authorization %q: challenge %q", auth, challenge)
			}
		}
	}
	if n := ep.opened.Load(); n != opened {
		t.Errorf("%d sessions opened by requests without the token", n-opened)
	}
	// The session refused above is still there, untouched (the DELETEs did
	// not end it), and the scheme is case-insensitive (RFC 7235).
	resp := (&rawClient{t: t, url: ep.url, token: ep.token, session: c.session}).post("application/json", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the session after the refused requests: %s", resp.Status)
	}
	r, _ := http.NewRequest(http.MethodPost, ep.url, strings.NewReader(init))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "bEaReR "+ep.token)
	if resp, err := http.DefaultClient.Do(r); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("bEaReR TOKEN: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
}

// slowBody opens a connection to u and sends the headers of an initialize
// POST (with Authorization: authorization, unless empty) announcing a body
// of 100 bytes that never comes. The test closes the connection at its end.
func slowBody(t *testing.T, u, authorization string) net.Conn {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "POST " + pu.Path + " HTTP/1.1\r\nHost: " + pu.Host + "\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: 100\r\n"
	if authorization != "" {
		head += "Authorization: " + authorization + "\r\n"
	}
	if _, err := conn.Write([]byte(head + "\r\n")); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readStatus reads the response on conn within waitLimit: its status and
// headers; an error when none came.
func readStatus(conn net.Conn) (*http.Response, error) {
	if err := conn.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return resp, nil
}

// TestHTTPSlowBodiesWithoutTheTokenHoldNothing: requests without the token
// whose bodies never come are answered 401 at once, their bodies unread and
// their connections closed, so they hold no slot: a real client opens a
// session while they stay connected. (Before the token, four such bodies
// held every initialize slot for a minute.)
func TestHTTPSlowBodiesWithoutTheTokenHoldNothing(t *testing.T) {
	ep := startEndpoint(t)
	for i := range 2 * bodySlots {
		auth := ""
		if i%2 == 1 {
			auth = "Bearer " + NewToken()
		}
		conn := slowBody(t, ep.url, auth)
		resp, err := readStatus(conn)
		if err != nil {
			t.Fatalf("slow body %d: no answer: %v", i, err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("slow body %d: %s, want 401", i, resp.Status)
		}
		if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("slow body %d: the connection is still open after the 401 (%v)", i, err)
		}
	}
	newRawClient(t, ep).initialize()
}

// TestHTTPSlotWaitHasADeadline: when clients with the token hold every
// initialize slot with bodies that never come, another initialize waits
// for one only a while, then gets 503 with Retry-After, its body unread;
// once the slow ones are gone, initialize works again.
func TestHTTPSlotWaitHasADeadline(t *testing.T) {
	ep := startEndpoint(t)
	ep.srv.slotWait = 200 * time.Millisecond
	var slow []net.Conn
	for range bodySlots {
		slow = append(slow, slowBody(t, ep.url, "Bearer "+ep.token))
	}
	// Each slow request holds its slot once its headers are read; the
	// fifth one waits on them.
	for deadline := time.Now().Add(waitLimit); len(ep.srv.initSlots) < bodySlots; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the slow bodies hold %d slots of %d", len(ep.srv.initSlots), bodySlots)
		}
	}
	conn := slowBody(t, ep.url, "Bearer "+ep.token)
	resp, err := readStatus(conn)
	if err != nil {
		t.Fatalf("a request while the slots are held: no answer: %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a request while the slots are held: %s, Retry-After %q; want 503 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if n := ep.opened.Load(); n != 0 {
		t.Errorf("%d sessions opened", n)
	}
	for _, c := range slow {
		c.Close()
	}
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := (&rawClient{t: t, url: ep.url, token: ep.token}).send("application/json",
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"real","version":"1"}}}`)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("initialize after the slow bodies left: %s", resp.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHTTPEventStreamAloneDoesNotKeepASession: a session whose client only
// holds its event stream open (GET) ends after the idle timeout like any
// idle one: the stream ends and the session's id gets 404. Otherwise
// whoever holds sessions' streams would keep every session slot for good.
func TestHTTPEventStreamAloneDoesNotKeepASession(t *testing.T) {
	ep := startEndpoint(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond; c.KeepAlive = 50 * time.Millisecond })
	c := newRawClient(t, ep)
	c.initialize()
	standalone := c.listen()
	select {
	case m, ok := <-standalone.msgs:
		if ok {
			t.Fatalf("the event stream carried %v", m)
		}
	case <-time.After(waitLimit):
		t.Fatalf("the session with its event stream open did not end within %s (idle timeout 300ms)", waitLimit)
	}
	resp := c.post("application/json", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the expired session's id: %s, want 404", resp.Status)
	}
}

// TestCheckToken: tokens shorter than 32 characters, or with characters
// outside RFC 6750's b64token, are refused; NewToken's pass.
func TestCheckToken(t *testing.T) {
	for _, bad := range []string{"", "short", strings.Repeat("a", MinTokenLength-1), strings.Repeat("a", 40) + " b",
		strings.Repeat("a", 40) + "\n", strings.Repeat("a", 40) + ",", strings.Repeat("=", 40), strings.Repeat("a", 30) + "==a",
		strings.Repeat("a", 2000)} {
		if CheckToken(bad) == nil {
			t.Errorf("CheckToken(%q) accepted it", bad)
		}
	}
	for _, good := range []string{NewToken(), strings.Repeat("0123456789abcdef", 4), "abcdefghijklmnopqrstuvwxyzABCDEF-._~+/=="} {
		if err := CheckToken(good); err != nil {
			t.Errorf("CheckToken(%q): %v", good, err)
		}
	}
	if a, b := NewToken(), NewToken(); a == b || len(a) != 43 {
		t.Errorf("NewToken: %q and %q", a, b)
	}
	newSession := func(jsonrpc.RoutedStream) (func(context.Context) error, error) { return nil, errors.New("not called") }
	for _, token := range []string{"", "short"} {
		if _, err := NewServer(Config{NewSession: newSession, Versions: []string{"2025-11-25"}, Token: token}); err == nil {
			t.Errorf("NewServer with the token %q: no error", token)
		}
	}
}

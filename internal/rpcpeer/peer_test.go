// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package rpcpeer_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/rpcpeer"
)

// readLine reads the next line the peer wrote, failing the test at the end
// of input.
func readLine(t *testing.T, s *jsonrpc.LineStream) string {
	t.Helper()
	line, err := s.Read()
	if err != nil {
		t.Fatalf("read the peer's answer: %v", err)
	}
	return string(line)
}

// A request with a handler of its own gets that handler's answer, any other
// the fallback's; both are taken. Replies and notifications are not
// answered. Without a fallback a request is left to the caller's waits,
// unanswered.
func TestFallbackAnswersTheOtherRequests(t *testing.T) {
	other, mine := mcppeer.Pipes(t)
	p := rpcpeer.New("host", mine, rpcpeer.WithHandler("roots/list", func(*rpcpeer.Message) (any, *jsonrpc.Error) {
		return map[string]any{"roots": []any{}}, nil
	}), rpcpeer.WithFallback(rpcpeer.MethodNotFound))
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{}}`,
		`{"jsonrpc":"2.0","id":"mine","result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress"}`,
		`{"jsonrpc":"2.0","id":9,"method":"z/last"}`,
	} {
		if err := other.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if got := readLine(t, other); got != `{"id":1,"jsonrpc":"2.0","result":{"roots":[]}}` {
		t.Errorf("roots/list answered %s", got)
	}
	if got := readLine(t, other); got != `{"error":{"code":-32601,"message":"Method not found"},"id":"s","jsonrpc":"2.0"}` {
		t.Errorf("sampling/createMessage answered %s", got)
	}
	// The reply and the notification are not answered and are the messages
	// left to wait for.
	if m, err := p.AwaitReply(`"mine"`); err != nil || m.Seq != 2 {
		t.Fatalf("the reply: %+v, %v", m, err)
	}
	if m, err := p.Next(); err != nil || !m.IsNotification("notifications/progress") || m.Seq != 3 {
		t.Fatalf("next message %+v, %v", m, err)
	}
	// The peer answers in order: the next answer is the last request's.
	if got := readLine(t, other); got != `{"error":{"code":-32601,"message":"Method not found"},"id":9,"jsonrpc":"2.0"}` {
		t.Errorf("the answer after the reply and the notification is %s", got)
	}

	other2, mine2 := mcppeer.Pipes(t)
	bare := rpcpeer.New("host", mine2, rpcpeer.WithWait(time.Minute))
	if err := other2.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"roots/list"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := bare.AwaitRequest("roots/list"); err != nil {
		t.Fatalf("a request without a handler is not offered: %v", err)
	}
}

// Under OfferAnswered a handled request is answered and still offered to
// waits, once.
func TestOfferAnswered(t *testing.T) {
	other, mine := mcppeer.Pipes(t)
	p := rpcpeer.New("broker", mine, rpcpeer.OfferAnswered(), rpcpeer.WithHandler("ping", func(*rpcpeer.Message) (any, *jsonrpc.Error) { return nil, nil }))
	if err := other.Write([]byte(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	if got := readLine(t, other); got != `{"id":5,"jsonrpc":"2.0","result":{}}` {
		t.Errorf("ping answered %s", got)
	}
	if _, err := p.AwaitRequest("ping"); err != nil {
		t.Fatalf("the answered ping is not offered: %v", err)
	}
	if left := p.Pending(func(*rpcpeer.Message) bool { return true }); len(left) != 0 {
		t.Errorf("still pending after the wait took it: %d", len(left))
	}
}

// An error reply with no id member is not a JSON-RPC 2.0 message, though
// the broker's tolerant reader accepts it; with "id": null it is one.
func TestErrorReplyNeedsAnIDMember(t *testing.T) {
	other, mine := mcppeer.Pipes(t)
	p := rpcpeer.New("broker", mine, rpcpeer.RequireValid())
	for _, line := range []string{
		`{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
	} {
		if err := other.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := p.AwaitReply("null")
	if err != nil || m.Seq != 0 || m.Error == nil || m.Error.Code != -32700 {
		t.Fatalf("the reply with a null id: %+v, %v", m, err)
	}
	if probs := p.Problems(); len(probs) != 1 || !strings.Contains(probs[0], "an error reply without an id member") {
		t.Errorf("problems %q", probs)
	}
}

// A wait that ends says why in a *WaitError; a wait whose context ends
// returns at once.
func TestWaitErrorAndContext(t *testing.T) {
	other, mine := mcppeer.Pipes(t)
	p := rpcpeer.New("quiet", mine, rpcpeer.WithWait(20*time.Millisecond))
	p.Note("> (a note of the caller)")
	_, err := p.AwaitReply("3")
	var we *rpcpeer.WaitError
	if !errors.As(err, &we) || we.Condition != "no reply to id 3 from quiet" || we.Why != "within 20ms" ||
		!strings.Contains(we.Transcript, "> (a note of the caller)") {
		t.Fatalf("error %#v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	returned := make(chan *rpcpeer.Message, 1)
	go func() { returned <- p.TryAwait(ctx, time.Hour, func(*rpcpeer.Message) bool { return true }) }()
	select {
	case m := <-returned:
		if m != nil {
			t.Errorf("a cancelled wait returned %+v", m)
		}
	case <-time.After(rpcpeer.DefaultWait):
		t.Fatal("a wait whose context ended did not return")
	}

	_ = other.Close()
	<-p.Done()
	if err := p.WaitFor("a reply", func(all []*rpcpeer.Message) bool { return len(all) > 0 }); !errors.As(err, &we) ||
		we.Condition != "not a reply from quiet" || we.Why != "before its output ended" {
		t.Errorf("error after the end %#v", err)
	}
}

// A handler's answer that cannot be written is reported to OnAnswerFailure.
func TestAnswerFailureIsReported(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = outW.Close() // the peer's answers have nowhere to go
	defer inW.Close()
	defer outR.Close()
	failed := make(chan error, 1)
	p := rpcpeer.New("broker", jsonrpc.NewLineStream(inR, outW, 0), rpcpeer.WithFallback(rpcpeer.MethodNotFound),
		rpcpeer.OnAnswerFailure(func(req *rpcpeer.Message, err error) { failed <- err }))
	if _, err := inW.WriteString(`{"jsonrpc":"2.0","id":1,"method":"x/y"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), "answer broker's x/y: write to broker:") {
			t.Errorf("failure %v", err)
		}
	case <-time.After(rpcpeer.DefaultWait):
		t.Fatalf("no failure reported; the session:\n%s", p.Transcript(0))
	}
	_ = inW.Close()
	<-p.Done()
	_ = inR.Close()
}

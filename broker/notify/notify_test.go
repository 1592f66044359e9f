// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package notify_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/notify"
	"github.com/fsbroker/fsbroker/internal/dbustest"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// waitLimit bounds each wait for a notification that should come promptly.
const waitLimit = 30 * time.Second

var question = consent.Request{
	Server: consent.Server{ID: "notes", Name: "<b>notes</b>", Version: "1.0"},
	Paths:  []string{"proj/a.txt", "proj/b.txt", "proj/c.txt", "proj/d.txt"},
	Access: consent.AccessWrite,
}

// TestConsentWaitingNotification: a consent question shows a notification
// on the session bus's notification service (urgent, naming the server as
// unverified with its markup escaped, the access, the first paths and
// where to answer), and its end closes that notification.
func TestConsentWaitingNotification(t *testing.T) {
	addr := dbustest.StartBus(t)
	svc := dbustest.ServeNotifications(t, addr)
	n := notify.New(notify.WithAddress(addr), notify.WithGrace(0))
	t.Cleanup(n.Close)

	ended := n.ConsentWaiting(consent.NamePrompt, question)
	shown := svc.Await(t, "Notify", waitLimit, func(c dbustest.Call) bool { return c.Method == "Notify" })
	if shown.AppName != notify.AppName || !strings.Contains(shown.Summary, "asks for file access") {
		t.Errorf("notification %+v: want app %q and a summary that says a server asks for file access", shown, notify.AppName)
	}
	for _, want := range []string{`"&lt;b&gt;notes&lt;/b&gt;" (unverified name)`, "write access", "proj/a.txt, proj/b.txt, proj/c.txt and 1 more",
		"on the terminal"} {
		if !strings.Contains(shown.Body, want) {
			t.Errorf("body %q lacks %q", shown.Body, want)
		}
	}
	if strings.Contains(shown.Body, "<b>") {
		t.Errorf("body %q passes the server's markup on", shown.Body)
	}
	if u, ok := shown.Hints["urgency"]; !ok || u.Value() != byte(2) {
		t.Errorf("urgency hint %v, want critical (2)", shown.Hints["urgency"])
	}
	ended(true)
	svc.Await(t, "CloseNotification of the answered question", waitLimit, func(c dbustest.Call) bool {
		return c.Method == "CloseNotification" && c.ID == shown.ID
	})
}

// TestConsentAnsweredWithinGraceShowsNothing: a question that ends within
// the grace period (answered at once, or nobody to ask) shows nothing; the
// notification queued after it is shown, so the service has heard all
// there was to hear.
func TestConsentAnsweredWithinGraceShowsNothing(t *testing.T) {
	addr := dbustest.StartBus(t)
	svc := dbustest.ServeNotifications(t, addr)
	n := notify.New(notify.WithAddress(addr), notify.WithGrace(200*time.Millisecond))
	t.Cleanup(n.Close)

	n.ConsentWaiting(consent.NameElicit, question)(false)
	n.FilesUsed(consent.Server{ID: "indexer", Pinned: true}, "read", "proj")
	used := svc.Await(t, "the files-used notification", waitLimit, func(c dbustest.Call) bool { return c.Method == "Notify" })
	if !strings.Contains(used.Body, `"indexer" started using files: read in root "proj"`) {
		t.Errorf("body %q", used.Body)
	}
	if calls := svc.Calls(); len(calls) != 1 {
		t.Errorf("the service got %+v, want the files-used notification alone", calls)
	}
}

// TestNoSessionBus: without DBUS_SESSION_BUS_ADDRESS there is no notifier,
// and a nil one does nothing; with an address nobody answers on, calls
// return at once and Close ends.
func TestNoSessionBus(t *testing.T) {
	t.Setenv(notify.BusAddressEnv, "")
	n := notify.New()
	if n != nil {
		t.Fatal("a notifier without a session bus")
	}
	n.ConsentWaiting(consent.NamePrompt, question)(true)
	n.FilesUsed(consent.Server{ID: "x"}, "read", "proj")
	n.Close()

	gone := notify.New(notify.WithAddress("unix:path="+t.TempDir()+"/no-bus"), notify.WithGrace(0))
	for range 100 {
		gone.ConsentWaiting(consent.NamePrompt, question)(true)
		gone.FilesUsed(consent.Server{ID: "x"}, "read", "proj")
	}
	gone.Close()
}

// stuckService owns the notification service on a bus and never answers a
// Notify until the test ends: a desktop that hangs.
type stuckService struct {
	mu      sync.Mutex
	calls   int
	release chan struct{}
}

func (s *stuckService) Notify(string, uint32, string, string, string, []string, map[string]dbus.Variant, int32) (uint32, *dbus.Error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	<-s.release
	return 1, nil
}

func (s *stuckService) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestHungServiceNeverBlocks: a notification service that never answers
// holds up nothing: the calls of the request path return at once, the
// queue is bounded (what does not fit is dropped, not queued), each call
// gives up at the timeout, and Close ends.
func TestHungServiceNeverBlocks(t *testing.T) {
	addr := dbustest.StartBus(t)
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	svc := &stuckService{release: make(chan struct{})}
	t.Cleanup(func() { close(svc.release) })
	if err := conn.Export(svc, notify.ObjectPath, notify.Interface); err != nil {
		t.Fatal(err)
	}
	if reply, err := conn.RequestName(notify.ServiceName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own the service: %v %v", reply, err)
	}
	var log testlog.Lines
	n := notify.New(notify.WithAddress(addr), notify.WithTimeout(100*time.Millisecond), notify.WithGrace(0),
		notify.WithLogger(log.Logger()))
	const sent = 10 * notify.DefaultQueue
	for range sent {
		n.FilesUsed(consent.Server{ID: "x"}, "read", "proj")
	}
	// The sender was stuck in its first call (or two) all along: the
	// queue's worth waits, and the rest was dropped.
	if dropped := log.Count("desktop notification dropped"); dropped < sent-notify.DefaultQueue-2 {
		t.Errorf("%d of %d notifications dropped while the service hung, want all but the queue's %d", dropped, sent, notify.DefaultQueue)
	}
	// The sender gives up on each stuck call after the timeout and goes on
	// with the queue; at most the queue's worth, and the one being sent when
	// the loop ran, reach the service.
	deadline := time.Now().Add(waitLimit)
	for svc.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c := svc.count(); c < 2 {
		t.Fatalf("the sender did not go on after a stuck call: %d calls", c)
	}
	n.Close()
	if c := svc.count(); c > notify.DefaultQueue+1 {
		t.Errorf("%d of %d notifications reached the service: the queue holds %d, the rest must be dropped", c, sent, notify.DefaultQueue)
	}
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package dbustest gives a test a D-Bus session bus of its own and a
// desktop notification service on it: a real dbus-daemon, started by the
// test with a configuration in the test's temporary directory, and a real
// peer on that bus that owns org.freedesktop.Notifications and records the
// calls it gets. The broker's notifications are then observed as the
// desktop would get them. Only tests import this package.
package dbustest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// RequireEnv names the environment variable that makes a missing
// dbus-daemon fail the test instead of skipping it (CI sets it).
const RequireEnv = "FSBROKER_REQUIRE_DBUS"

// config is the bus's configuration: a session bus on a socket in dir,
// that lets every connection own any name and call anything.
const config = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// StartBus starts a session bus for t, stopped at its end, and returns its
// address (what DBUS_SESSION_BUS_ADDRESS holds). Without dbus-daemon the
// test is skipped, saying so, unless FSBROKER_REQUIRE_DBUS=1: then it fails.
func StartBus(t testing.TB) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("dbus-daemon is missing and %s=1: install the Debian package dbus-daemon", RequireEnv)
		}
		t.Skipf("dbus-daemon is missing (the Debian package dbus-daemon): no session bus to test desktop notifications on; %s=1 makes this a failure", RequireEnv)
	}
	// A short directory: a socket's path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "fsbroker-dbus-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	conf := filepath.Join(dir, "session.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(config, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--nofork", "--nopidfile", "--config-file="+conf, "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
	}()
	select {
	case a := <-addr:
		if a == "" {
			t.Fatalf("dbus-daemon printed no address; stderr: %s", stderr.String())
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatalf("dbus-daemon printed no address within 30 s; stderr: %s", stderr.String())
	}
	return ""
}

// Call is one call the notification service got.
type Call struct {
	// Method is "Notify" or "CloseNotification".
	Method string
	// The arguments of Notify.
	AppName    string
	ReplacesID uint32
	Summary    string
	Body       string
	Hints      map[string]dbus.Variant
	Timeout    int32
	// ID is the notification's id: the one Notify returned, or the one
	// CloseNotification closes.
	ID uint32
}

// Notifications is a desktop notification service (the
// org.freedesktop.Notifications interface of the Desktop Notifications
// Specification) on a bus, that records every call.
type Notifications struct {
	mu     sync.Mutex
	calls  []Call
	next   uint32
	notify chan struct{} // closed and replaced at each call
}

// ServeNotifications connects to the bus at addr, owns
// org.freedesktop.Notifications there and serves it until the test ends.
func ServeNotifications(t testing.TB, addr string) *Notifications {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatalf("connect to the test's bus: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	n := &Notifications{notify: make(chan struct{})}
	if err := conn.Export(server{n}, "/org/freedesktop/Notifications", "org.freedesktop.Notifications"); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName("org.freedesktop.Notifications", dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own org.freedesktop.Notifications: reply %v, %v", reply, err)
	}
	return n
}

// record keeps c.
func (n *Notifications) record(c Call) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, c)
	close(n.notify)
	n.notify = make(chan struct{})
}

// Calls returns the calls so far, in order.
func (n *Notifications) Calls() []Call {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Call(nil), n.calls...)
}

// Await waits up to within for a call that match accepts, and returns it;
// none fails the test with the calls it got.
func (n *Notifications) Await(t testing.TB, what string, within time.Duration, match func(Call) bool) Call {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		n.mu.Lock()
		for _, c := range n.calls {
			if match(c) {
				n.mu.Unlock()
				return c
			}
		}
		changed := n.notify
		n.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s within %s; the notification service got: %+v", what, within, n.Calls())
			return Call{}
		}
	}
}

// server is what the bus calls: the methods of
// org.freedesktop.Notifications.
type server struct{ n *Notifications }

// Notify shows a notification: it is recorded, and gets the next id.
func (s server) Notify(appName string, replacesID uint32, _ string, summary, body string, _ []string,
	hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	s.n.mu.Lock()
	s.n.next++
	id := s.n.next
	s.n.mu.Unlock()
	s.n.record(Call{Method: "Notify", AppName: appName, ReplacesID: replacesID, Summary: summary, Body: body,
		Hints: hints, Timeout: timeout, ID: id})
	return id, nil
}

// CloseNotification closes a notification: it is recorded.
func (s server) CloseNotification(id uint32) *dbus.Error {
	s.n.record(Call{Method: "CloseNotification", ID: id})
	return nil
}

// GetCapabilities says the service shows a body.
func (s server) GetCapabilities() ([]string, *dbus.Error) { return []string{"body"}, nil }

// GetServerInformation names the service.
func (s server) GetServerInformation() (name, vendor, version, specVersion string, err *dbus.Error) {
	return "fsbroker-test", "fsbroker", "0", "1.2", nil
}

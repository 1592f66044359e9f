// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package notify tells the person at the desktop what a broker process
// does that they may want to know at once (docs/metrics.md): that a consent
// question waits for them, and that a server started using files. It calls
// org.freedesktop.Notifications.Notify, the freedesktop desktop
// notification service, on the session D-Bus (DBUS_SESSION_BUS_ADDRESS).
//
// It never holds up a request: the corridor's calls only queue a
// notification (at most DefaultQueue wait; more are dropped), and one
// goroutine of its own connects to the bus and sends them, each call within
// DefaultTimeout. Where there is no session bus New returns nil, and a nil
// *Notifier does nothing; a bus without the service, or one that stops
// answering, costs the dropped notifications and a debug log line, never a
// request's time.
package notify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/consent"
)

// The freedesktop notification service (Desktop Notifications
// Specification 1.2).
const (
	ServiceName = "org.freedesktop.Notifications"
	ObjectPath  = dbus.ObjectPath("/org/freedesktop/Notifications")
	Interface   = "org.freedesktop.Notifications"
)

// AppName is the app_name of every notification.
const AppName = "fsbroker"

// BusAddressEnv names the environment variable that holds the session bus's
// address.
const BusAddressEnv = "DBUS_SESSION_BUS_ADDRESS"

// Defaults of the options.
const (
	// DefaultQueue is how many notifications may wait to be sent; a
	// notification that finds the queue full is dropped.
	DefaultQueue = 16
	// DefaultTimeout bounds connecting to the bus and each call.
	DefaultTimeout = 2 * time.Second
	// DefaultGrace is how long a consent question waits before its
	// notification is sent: one answered (or found to have nobody to ask)
	// sooner shows none.
	DefaultGrace = 300 * time.Millisecond
)

// Urgency levels of the specification's urgency hint.
const (
	urgencyNormal   byte = 1
	urgencyCritical byte = 2
)

// Option configures a Notifier.
type Option func(*Notifier)

// WithAddress sets the bus's address instead of DBUS_SESSION_BUS_ADDRESS's.
func WithAddress(addr string) Option { return func(n *Notifier) { n.addr = addr } }

// WithLogger sets the logger of the notifier's failures (debug level).
func WithLogger(l hclog.Logger) Option { return func(n *Notifier) { n.log = l } }

// WithTimeout bounds connecting and each call (DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(n *Notifier) {
		if d > 0 {
			n.timeout = d
		}
	}
}

// WithGrace sets how long a consent question waits before its notification
// is sent (DefaultGrace; 0: at once).
func WithGrace(d time.Duration) Option {
	return func(n *Notifier) {
		if d >= 0 {
			n.grace = d
		}
	}
}

// Notifier sends a broker process's desktop notifications. Its methods are
// safe for concurrent use and never block; a nil *Notifier does nothing.
type Notifier struct {
	addr    string
	log     hclog.Logger
	timeout time.Duration
	grace   time.Duration

	queue chan *note
	life  context.Context // ends with Close
	stop  context.CancelFunc
	done  chan struct{} // closed when the sender has ended

	// conn is the sender goroutine's connection (nil: not connected), and
	// endConn ends its context.
	conn    *dbus.Conn
	endConn context.CancelFunc
}

// note is one notification to show, or one to close.
type note struct {
	summary, body string
	urgency       byte
	notBefore     time.Time
	closes        uint32 // not 0: close this notification instead

	mu    sync.Mutex
	ended bool   // the wait it tells of ended: show nothing more
	id    uint32 // the id the service gave it once shown
}

// New returns the notifier of the session bus at DBUS_SESSION_BUS_ADDRESS
// (WithAddress: another), its sender started and connecting; nil, which
// notifies nothing, when no address is set. Close stops it.
func New(opts ...Option) *Notifier {
	n := &Notifier{log: hclog.NewNullLogger(), timeout: DefaultTimeout, grace: DefaultGrace,
		queue: make(chan *note, DefaultQueue), done: make(chan struct{})}
	n.addr = os.Getenv(BusAddressEnv)
	for _, o := range opts {
		o(n)
	}
	if n.addr == "" {
		return nil
	}
	n.life, n.stop = context.WithCancel(context.Background())
	go n.send()
	return n
}

// Close stops the sender, waiting at most for one call to end, and closes
// the connection. Notifications still queued are dropped.
func (n *Notifier) Close() {
	if n == nil {
		return
	}
	n.stop()
	<-n.done
}

// ConsentWaiting queues the notification that provider waits for a person
// to answer req, sent after the grace period unless the wait ended before;
// the function it returns ends the wait and withdraws the notification
// (CloseNotification) if it was shown. Its signature is consent.WaitNotice's.
func (n *Notifier) ConsentWaiting(provider string, req consent.Request) (ended func(asked bool)) {
	if n == nil {
		return func(bool) {}
	}
	where := "where fsbroker asks"
	switch provider {
	case consent.NamePrompt:
		where = "on the terminal fsbroker runs in"
	case consent.NameElicit:
		where = "in the MCP host's window"
	case "console":
		where = "in fsbroker console"
	}
	nt := &note{summary: "fsbroker: an MCP server asks for file access",
		body:    req.Describe() + ". Answer " + where + ".",
		urgency: urgencyCritical, notBefore: time.Now().Add(n.grace)}
	n.enqueue(nt)
	return func(bool) {
		nt.mu.Lock()
		id := nt.id
		nt.ended = true
		nt.mu.Unlock()
		if id != 0 {
			n.enqueue(&note{closes: id})
		}
	}
}

// FilesUsed queues the notification that server started using files: the
// first file request of its session that the broker allowed, an operation
// (read, write, list, ...) in the root named root.
func (n *Notifier) FilesUsed(server consent.Server, operation, root string) {
	if n == nil {
		return
	}
	n.enqueue(&note{summary: "fsbroker: an MCP server is using files",
		body:    fmt.Sprintf("%s started using files: %s in root %q.", server.Describe(), operation, root),
		urgency: urgencyNormal})
}

// enqueue queues nt, or drops it when the queue is full or the notifier
// closed.
func (n *Notifier) enqueue(nt *note) {
	select {
	case <-n.life.Done():
		return
	default:
	}
	select {
	case n.queue <- nt:
	default:
		n.log.Debug("desktop notification dropped: the queue is full", "summary", nt.summary)
	}
}

// send is the sender goroutine: it connects at once (a notification then
// need not wait for the handshake), then sends what is queued until Close.
func (n *Notifier) send() {
	defer close(n.done)
	defer n.disconnect()
	if err := n.connect(); err != nil {
		n.log.Debug("no desktop notifications for now: cannot connect to the session bus", "error", err)
	}
	for {
		select {
		case <-n.life.Done():
			return
		case nt := <-n.queue:
			n.deliver(nt)
		}
	}
}

// deliver shows nt (after its notBefore, unless its wait ended), or closes
// the notification it names.
func (n *Notifier) deliver(nt *note) {
	if nt.closes != 0 {
		if err := n.call("CloseNotification", nil, nt.closes); err != nil {
			n.log.Debug("desktop notification not closed", "error", err)
		}
		return
	}
	if wait := time.Until(nt.notBefore); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-n.life.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	nt.mu.Lock()
	ended := nt.ended
	nt.mu.Unlock()
	if ended {
		return
	}
	hints := map[string]dbus.Variant{"urgency": dbus.MakeVariant(nt.urgency)}
	var id uint32
	if err := n.call("Notify", &id, AppName, uint32(0), "", nt.summary, escapeMarkup(nt.body), []string{}, hints, int32(-1)); err != nil {
		n.log.Debug("desktop notification not shown", "summary", nt.summary, "error", err)
		return
	}
	nt.mu.Lock()
	ended = nt.ended
	nt.id = id
	nt.mu.Unlock()
	if ended && id != 0 { // the wait ended while it was being shown
		if err := n.call("CloseNotification", nil, id); err != nil {
			n.log.Debug("desktop notification not closed", "error", err)
		}
	}
}

// call calls method of the notification service with args within the
// timeout, connecting first if need be, and stores its one reply value in
// reply (nil: none). A failed call drops the connection, to make a fresh
// one next time.
func (n *Notifier) call(method string, reply any, args ...any) error {
	if err := n.connect(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(n.life, n.timeout)
	defer cancel()
	c := n.conn.Object(ServiceName, ObjectPath).CallWithContext(ctx, Interface+"."+method, 0, args...)
	err := c.Err
	if err == nil && reply != nil {
		err = c.Store(reply)
	}
	if err != nil {
		var remote dbus.Error
		if !errors.As(err, &remote) { // the connection failed, not the service
			n.disconnect()
		}
		return fmt.Errorf("%s.%s: %w", Interface, method, err)
	}
	return nil
}

// connect connects to the bus unless connected, within the timeout (the
// connection's context is cancelled, closing it, if the handshake takes
// longer).
func (n *Notifier) connect() error {
	if n.conn != nil && n.conn.Connected() {
		return nil
	}
	n.disconnect()
	ctx, cancel := context.WithCancel(n.life)
	timer := time.AfterFunc(n.timeout, cancel)
	conn, err := dbus.Connect(n.addr, dbus.WithContext(ctx))
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("no answer within %s", n.timeout)
		_ = conn.Close()
	}
	if err != nil {
		cancel()
		return fmt.Errorf("connect to the session bus: %w", err)
	}
	n.conn, n.endConn = conn, cancel
	return nil
}

// disconnect closes the connection, if any.
func (n *Notifier) disconnect() {
	if n.conn != nil {
		_ = n.conn.Close()
		n.endConn()
		n.conn, n.endConn = nil, nil
	}
}

// markupEscaper escapes the characters the specification's body markup
// (a subset of HTML) reads: untrusted names show as written, never as
// markup.
var markupEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escapeMarkup escapes s for a notification's body.
func escapeMarkup(s string) string { return markupEscaper.Replace(s) }

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

// Package syslogtest stands in for a syslog daemon in the tests of the audit witness: a real
// socket, a unix datagram socket or UDP on the loopback, that receives the bytes Go's log/syslog
// sends and keeps each message as one line, as rsyslog writes /var/log/syslog. The broker
// itself never imports it.
package syslogtest

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds every wait for a message.
const waitLimit = 10 * time.Second

// Daemon is the stand-in syslog daemon.
type Daemon struct {
	conn    net.PacketConn
	spec    string // the witness setting that reaches it
	mu      sync.Mutex
	lines   []string
	reading bool
	done    chan struct{} // closed when the reader has stopped
}

// SocketPath returns a path for a unix socket in a new short temporary directory (a socket path
// has at most 107 bytes), removed when the test ends.
func SocketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "syslog")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "log.sock")
}

// Listen starts a daemon on a unixgram socket in a new directory ("unixgram") or on UDP on the
// loopback ("udp"), reading until the test ends.
func Listen(t testing.TB, network string) *Daemon {
	t.Helper()
	switch network {
	case "unixgram":
		return ListenAt(t, SocketPath(t))
	case "udp":
		conn, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		d := newDaemon(t, conn, "syslog:udp://"+conn.LocalAddr().String())
		d.Resume()
		return d
	}
	t.Fatalf("syslogtest: network %q", network)
	return nil
}

// ListenAt starts a daemon on a unixgram socket at path, reading until the test ends.
func ListenAt(t testing.TB, path string) *Daemon {
	t.Helper()
	d := listenUnixgram(t, path)
	d.Resume()
	return d
}

// Stalled starts a daemon on a unixgram socket that does not read, and fills the socket's queue
// with messages of its own, so that a write to it blocks: a daemon that stopped reading. Resume
// makes it read.
func Stalled(t testing.TB) *Daemon {
	t.Helper()
	d := listenUnixgram(t, SocketPath(t))
	fill, err := net.DialUnix("unixgram", nil, d.conn.LocalAddr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer fill.Close()
	fill.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	n := 0
	for ; n < 100_000; n++ {
		if _, err := fill.Write([]byte("<30>filler")); err != nil {
			break
		}
	}
	if n == 0 || n == 100_000 {
		t.Fatalf("syslogtest: filled the socket's queue with %d messages", n)
	}
	return d
}

// listenUnixgram listens on a unixgram socket at path, not reading yet.
func listenUnixgram(t testing.TB, path string) *Daemon {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	return newDaemon(t, conn, "syslog:unixgram://"+path)
}

// newDaemon wraps conn, closed when the test ends (which wakes a write blocked on it).
func newDaemon(t testing.TB, conn net.PacketConn, spec string) *Daemon {
	d := &Daemon{conn: conn, spec: spec, done: make(chan struct{})}
	t.Cleanup(func() {
		conn.Close()
		d.mu.Lock()
		reading := d.reading
		d.mu.Unlock()
		if reading {
			<-d.done
		}
	})
	return d
}

// Resume starts reading (once).
func (d *Daemon) Resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reading {
		return
	}
	d.reading = true
	go d.read()
}

// read keeps every message received, without its trailing newline.
func (d *Daemon) read() {
	defer close(d.done)
	buf := make([]byte, 64<<10)
	for {
		n, _, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		d.mu.Lock()
		d.lines = append(d.lines, strings.TrimRight(string(buf[:n]), "\n"))
		d.mu.Unlock()
	}
}

// Spec returns the witness setting that reaches the daemon: syslog:unixgram:///PATH or
// syslog:udp://HOST:PORT.
func (d *Daemon) Spec() string { return d.spec }

// Text returns the messages received so far, a line each.
func (d *Daemon) Text() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n") + "\n"
}

// WaitFor waits until a message holds every one of subs (UDP gives no acknowledgement, and
// the daemon reads on its own); the test fails after 10 s.
func (d *Daemon) WaitFor(t testing.TB, subs ...string) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(5 * time.Millisecond) {
		d.mu.Lock()
		found := slices.ContainsFunc(d.lines, func(l string) bool {
			return !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(l, s) })
		})
		d.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("syslogtest: no message with %q in:\n%s", subs, d.Text())
		}
	}
}

// Save writes the messages received so far to a new file, a line each, and returns its path:
// the copy of /var/log/syslog to give the verifier.
func (d *Daemon) Save(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "syslog")
	if err := os.WriteFile(p, []byte(d.Text()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

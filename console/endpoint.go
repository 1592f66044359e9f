// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/fsbroker/fsbroker/broker/transport/streamable"
)

// DefaultListen is where the console listens when --listen is not given:
// a free port of the loopback interface.
const DefaultListen = "127.0.0.1:0"

// ErrNeedsTLS is the error of a non-loopback --listen without a
// certificate.
var ErrNeedsTLS = errors.New("console: a non-loopback address needs TLS")

// Endpoint is where the console listens, and how.
type Endpoint struct {
	// Addr is HOST:PORT to listen on.
	Addr string
	// Loopback says HOST is a loopback address or localhost.
	Loopback bool
	// TLS is the server's TLS configuration; nil serves plain HTTP.
	TLS *tls.Config
	// names are the host names and addresses the certificate is for.
	names []string
}

// NewEndpoint checks where the console is to listen: listen is HOST:PORT
// (":PORT" is 127.0.0.1:PORT; "" is DefaultListen), certFile and keyFile
// the PEM certificate and key to serve TLS with (both or neither). A HOST
// other than a loopback address or localhost needs them: the error then
// wraps ErrNeedsTLS. The error says which flag is wrong (--listen,
// --tls-cert, --tls-key).
func NewEndpoint(listen, certFile, keyFile string) (Endpoint, error) {
	if listen == "" {
		listen = DefaultListen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return Endpoint{}, fmt.Errorf("--listen %q: want HOST:PORT or :PORT (%v)", listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ep := Endpoint{Addr: net.JoinHostPort(host, port), Loopback: streamable.IsLoopbackHost(host)}
	if (certFile == "") != (keyFile == "") {
		return Endpoint{}, errors.New("--tls-cert and --tls-key go together: give both, or neither")
	}
	if certFile == "" {
		if !ep.Loopback {
			return Endpoint{}, fmt.Errorf("%w: --listen %s is not a loopback address: the console serves it only over TLS, with --tls-cert FILE and --tls-key FILE (or listen on 127.0.0.1)", ErrNeedsTLS, listen)
		}
		return ep, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return Endpoint{}, fmt.Errorf("--tls-cert %s, --tls-key %s: %v", certFile, keyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return Endpoint{}, fmt.Errorf("--tls-cert %s: %v", certFile, err)
	}
	ep.names = append(ep.names, leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		ep.names = append(ep.names, ip.String())
	}
	ep.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	return ep, nil
}

// Listen listens on the endpoint. Without TLS, the address it binds must
// be a loopback one, whatever the host's name said (a localhost that
// resolves elsewhere): else it fails, wrapping ErrNeedsTLS.
func (e Endpoint) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", e.Addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", e.Addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); e.TLS == nil && (!ok || !tcp.IP.IsLoopback()) {
		_ = ln.Close()
		return nil, fmt.Errorf("%w: --listen %s bound %s, which is not a loopback address", ErrNeedsTLS, e.Addr, ln.Addr())
	}
	return ln, nil
}

// origins are the origins the console is served on once it listens at
// bound (the listener's address, with the port it got): the scheme, and
// each name a browser may reach it by with that port. On loopback (or an
// unspecified address): 127.0.0.1, localhost and [::1]; the host --listen
// names; the names and addresses of the certificate. The first is the one
// the URL to open names.
func (e Endpoint) origins(bound net.Addr) (scheme string, hosts []string) {
	scheme = "http"
	if e.TLS != nil {
		scheme = "https"
	}
	listenHost, _, _ := net.SplitHostPort(e.Addr)
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		_, port, _ = net.SplitHostPort(e.Addr)
	}
	add := func(h string) {
		hp := strings.ToLower(net.JoinHostPort(strings.Trim(h, "[]"), port))
		for _, have := range hosts {
			if have == hp {
				return
			}
		}
		hosts = append(hosts, hp)
	}
	ip := net.ParseIP(listenHost)
	if ip == nil || !ip.IsUnspecified() {
		add(listenHost)
	}
	if e.Loopback || ip != nil && ip.IsUnspecified() {
		for _, h := range []string{"127.0.0.1", "localhost", "::1"} {
			add(h)
		}
	}
	for _, n := range e.names {
		add(n)
	}
	return scheme, hosts
}

// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/transport/streamable"
	"github.com/fsbroker/fsbroker/serve"
)

// httpOptions are the settings of fsbroker serve --http.
type httpOptions struct {
	addr        string
	tlsCert     string
	tlsKey      string
	maxSessions int
	idleTimeout time.Duration
}

// flagsHTTP is the title of the --http flags in help.
const flagsHTTP = "Streamable HTTP"

// defaultHTTPHost is the host --http listens on when ADDR names none (:PORT).
const defaultHTTPHost = "127.0.0.1"

// registerHTTPFlags registers serve's --http flags on fs.
func registerHTTPFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.http.addr, "http", "", "serve MCP's Streamable HTTP on `ADDR` (HOST:PORT; :PORT is 127.0.0.1:PORT) at the endpoint /mcp, instead of stdio; a HOST other than a loopback address or localhost needs --tls-cert and --tls-key")
	fs.StringVar(&o.http.tlsCert, "tls-cert", "", "serve --http over TLS with the certificate (and chain) in this PEM `FILE`")
	fs.StringVar(&o.http.tlsKey, "tls-key", "", "the PEM `FILE` of the --tls-cert certificate's private key")
	fs.IntVar(&o.http.maxSessions, "http-max-sessions", streamable.DefaultMaxSessions, "HTTP sessions open at once (`N`); an initialize beyond gets 503")
	durationVar(fs, &o.http.idleTimeout, "http-idle-timeout", streamable.DefaultIdleTimeout, "end an HTTP session that has had no request in progress and no event stream open for this long")
	setFlagGroup(fs, flagsHTTP, "http", "tls-cert", "tls-key", "http-max-sessions", "http-idle-timeout")
}

// httpEndpoint is where and how serve --http listens.
type httpEndpoint struct {
	addr     string      // HOST:PORT
	loopback bool        // HOST is a loopback address or localhost
	tls      *tls.Config // nil: plain HTTP
}

// endpoint checks the --http settings (given or not, o.set says) and loads
// the TLS certificate: a non-loopback host without --tls-cert and --tls-key,
// one of the two alone, or either without --http is a usage error naming
// them.
func (o *options) endpoint() (httpEndpoint, error) {
	h := o.http
	if h.addr == "" {
		for _, f := range []string{"tls-cert", "tls-key", "http-max-sessions", "http-idle-timeout"} {
			if o.set[f] {
				return httpEndpoint{}, configErrorf("--%s applies to --http ADDR, which is not given", f)
			}
		}
		return httpEndpoint{}, nil
	}
	host, port, err := net.SplitHostPort(h.addr)
	if err != nil {
		return httpEndpoint{}, configErrorf("--http %q: want HOST:PORT or :PORT (%v)", h.addr, err)
	}
	if host == "" {
		host = defaultHTTPHost
	}
	ep := httpEndpoint{addr: net.JoinHostPort(host, port), loopback: streamable.IsLoopbackHost(host)}
	if (h.tlsCert == "") != (h.tlsKey == "") {
		return httpEndpoint{}, configErrorf("--tls-cert and --tls-key go together: give both, or neither")
	}
	if h.tlsCert == "" {
		if !ep.loopback {
			return httpEndpoint{}, configErrorf("--http %s is not a loopback address: serving it needs --tls-cert FILE and --tls-key FILE (or listen on 127.0.0.1)", h.addr)
		}
	} else {
		cert, err := tls.LoadX509KeyPair(h.tlsCert, h.tlsKey)
		if err != nil {
			return httpEndpoint{}, configErrorf("--tls-cert %s, --tls-key %s: %v", h.tlsCert, h.tlsKey, err)
		}
		ep.tls = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	if h.maxSessions < 1 || h.idleTimeout <= 0 {
		return httpEndpoint{}, configErrorf("--http-max-sessions must be at least 1, --http-idle-timeout positive")
	}
	return ep, nil
}

// prepareServe is prepare for fsbroker serve, on stdio or HTTP: the
// runtime open (after checks), the broker confined (--sandbox), and at
// least one root.
func prepareServe(o *options, stderr io.Writer, checks ...func(*setup) error) (*setup, error) {
	s, err := prepare(o, stderr, checks...)
	if err != nil {
		return nil, err
	}
	if err := s.rt.Confine(nil, false); err != nil {
		s.close()
		return nil, err
	}
	if s.rt.Roots().Len() == 0 {
		s.close()
		return nil, configErrorf("fsbroker serve needs at least one root (--root DIR or a config file)")
	}
	return s, nil
}

// serveConfig is the configuration of one serve session over transport
// ("stdio", "http"), with a corridor of its own.
func serveConfig(s *setup, transport string) serve.Config {
	l := s.rt.Limits()
	return serve.Config{
		Corridor:     s.rt.NewCorridor(),
		Roots:        s.rt.Roots,
		Log:          s.log,
		PinnedID:     s.rt.PinnedID(),
		Version:      s.rt.Version(),
		Transport:    transport,
		MaxReadBytes: l.MaxReadBytes,
		ConnOptions:  []jsonrpc.Option{jsonrpc.WithMaxInFlight(l.MaxInFlight), jsonrpc.WithShutdownTimeout(l.ShutdownTimeout)},
		WatchGrants:  s.rt.WatchGrants,
	}
}

// runServeHTTP serves hosts over Streamable HTTP, each HTTP session a serve
// session with its own corridor, until ctx ends (SIGINT, SIGTERM): then
// every session answers what is in flight and ends (session_end in the
// trail), and the server stops.
func runServeHTTP(ctx context.Context, o *options, stderr io.Writer) error {
	var ep httpEndpoint
	s, err := prepareServe(o, stderr, func(*setup) error {
		var err error
		ep, err = o.endpoint() // the certificate is read before the broker is confined
		return err
	})
	if err != nil {
		return err
	}
	defer s.close()
	srv, err := streamable.NewServer(streamable.Config{
		NewSession: func(stream jsonrpc.RoutedStream) (func(context.Context) error, error) {
			cfg := serveConfig(s, "http")
			sess, err := serve.NewSession(stream, cfg)
			if err != nil {
				cfg.Corridor.Close()
				return nil, err
			}
			return sess.Run, nil
		},
		Versions:        serve.SupportedVersions,
		MaxMessageBytes: o.maxMessageBytes,
		MaxSessions:     o.http.maxSessions,
		IdleTimeout:     o.http.idleTimeout,
		LoopbackOnly:    ep.loopback,
		Log:             s.log.Named("http"),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", ep.addr)
	if err != nil {
		return configErrorf("--http %s: %v", o.http.addr, err)
	}
	hs := &http.Server{
		Handler:           srv,
		TLSConfig:         ep.tls,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	served := make(chan error, 1)
	scheme := "http"
	if ep.tls != nil {
		scheme = "https"
		go func() { served <- hs.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- hs.Serve(ln) }()
	}
	s.log.Info("serving the filesystem tools over Streamable HTTP", "url", scheme+"://"+ln.Addr().String()+streamable.EndpointPath,
		"roots", s.rt.Roots().Len())
	if !ep.loopback {
		s.log.Warn("listening beyond this machine: fsbroker does not authenticate HTTP clients, so whoever reaches " +
			ep.addr + " is served the roots as the host it says it is; restrict who can connect (firewall, an authenticating proxy)")
	}

	var serveErr error
	select {
	case <-ctx.Done():
		s.log.Info("stopping: ending the HTTP sessions")
	case serveErr = <-served:
	}
	// Each session gets the shutdown timeout to answer what is in flight
	// (and its connection a second more to cancel the rest).
	stopCtx, cancel := context.WithTimeout(context.Background(), 2*o.shutdownTimeout+time.Second)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- hs.Shutdown(stopCtx) }() // closes the listener at once
	if err := srv.Close(stopCtx); err != nil {
		s.log.Warn("HTTP sessions did not stop in time", "error", err)
	}
	if err := <-shutdown; err != nil {
		_ = hs.Close()
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		s.log.Error("the HTTP server failed", "error", serveErr)
		return errAlreadyLogged
	}
	return nil
}

// servesHTTP reports whether serve runs over HTTP: --http, or one of its
// flags (which runServeHTTP refuses without it).
func (o *options) servesHTTP() bool {
	return o.http.addr != "" || o.set["tls-cert"] || o.set["tls-key"] || o.set["http-max-sessions"] || o.set["http-idle-timeout"]
}

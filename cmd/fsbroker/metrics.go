// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/broker/metrics"
	"github.com/fsbroker/fsbroker/broker/transport/streamable"
)

// flagsObserve titles the group of --metrics and --notify in help.
const flagsObserve = "Metrics and notifications"

// registerObserveFlags registers --metrics and --notify, the flags of every
// serving command (stdio, connect, wrap, serve).
func registerObserveFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.metricsAddr, "metrics", "", "serve the broker's Prometheus metrics at http://`ADDR`/metrics, ADDR a loopback address and port "+
		"(127.0.0.1:9464, [::1]:9464, localhost:9464; port 0 picks one, logged); no other address is accepted (docs/metrics.md)")
	fs.BoolVar(&o.notify, "notify", true, "desktop notifications, where a session D-Bus has the freedesktop notification service: "+
		"when consent waits for a person, and when a server starts using files (--notify=false: none)")
	setFlagGroup(fs, flagsObserve, "metrics", "notify")
}

// checkMetricsAddr refuses a --metrics address that is not a loopback
// address and a port: an IP address of the loopback range or localhost.
// No other name is looked up.
func checkMetricsAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return configErrorf("--metrics %q: want a loopback address and a port, as in 127.0.0.1:9464: %v", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return configErrorf("--metrics %q: the port %q is not a number from 0 to 65535", addr, port)
	}
	if !streamable.IsLoopbackHost(host) {
		return configErrorf("--metrics %q: the metrics are served on loopback only: give 127.0.0.1, ::1 or localhost and a port", addr)
	}
	return nil
}

// serveMetrics serves the runtime's metrics at --metrics, once the runtime
// is open; close stops it. An address that cannot be bound, or localhost
// bound to an address that is not loopback, is a usage error.
func (s *setup) serveMetrics() error {
	addr := s.opts.metricsAddr
	if addr == "" || s.rt.Metrics() == nil {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return configErrorf("--metrics %s: %v", addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		_ = ln.Close()
		return configErrorf("--metrics %s: bound to %s, which is not a loopback address", addr, ln.Addr())
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", loopbackHostOnly(metrics.Handler(s.rt.Metrics().Registry())))
	s.metricsServer = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := s.metricsServer.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("the metrics server stopped", "error", err)
		}
	}()
	s.log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return nil
}

// stopMetrics stops the metrics server, if it runs.
func (s *setup) stopMetrics() {
	if s.metricsServer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.metricsServer.Shutdown(ctx)
}

// loopbackHostOnly refuses, with 421 Misdirected Request, a request whose
// Host is not localhost or a loopback address: a web page whose own name a
// DNS rebinding pointed at 127.0.0.1 gets nothing.
func loopbackHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host // no port; IsLoopbackHost takes "[::1]" too
		}
		if !streamable.IsLoopbackHost(host) {
			http.Error(w, fmt.Sprintf("the metrics answer requests to a loopback address only, not to %q", r.Host), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

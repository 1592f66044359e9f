// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/transport/streamable"
	"github.com/fsbroker/fsbroker/internal/atomicfile"
	"github.com/fsbroker/fsbroker/serve"
)

// httpOptions are the settings of fsbroker serve --http.
type httpOptions struct {
	addr        string
	tlsCert     string
	tlsKey      string
	maxSessions int
	idleTimeout time.Duration
	tokenFile   string // --http-token-file ("": the default, httpTokenName in the state directory)
}

// flagsHTTP is the title of the --http flags in help.
const flagsHTTP = "Streamable HTTP"

// defaultHTTPHost is the host --http listens on when ADDR names none (:PORT).
const defaultHTTPHost = "127.0.0.1"

// httpTokenName is the token file's name in the state directory, when
// --http-token-file does not name one.
const httpTokenName = "http-token"

// maxTokenFileBytes bounds what is read of a token file.
const maxTokenFileBytes = 4096

// registerHTTPFlags registers serve's --http flags on fs.
func registerHTTPFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.http.addr, "http", "", "serve MCP's Streamable HTTP on `ADDR` (HOST:PORT; :PORT is 127.0.0.1:PORT) at the endpoint /mcp, instead of stdio; a HOST other than a loopback address or localhost needs --tls-cert and --tls-key")
	fs.StringVar(&o.http.tlsCert, "tls-cert", "", "serve --http over TLS with the certificate (and chain) in this PEM `FILE`")
	fs.StringVar(&o.http.tlsKey, "tls-key", "", "the PEM `FILE` of the --tls-cert certificate's private key")
	fs.IntVar(&o.http.maxSessions, "http-max-sessions", streamable.DefaultMaxSessions, "HTTP sessions open at once (`N`); an initialize beyond gets 503")
	durationVar(fs, &o.http.idleTimeout, "http-idle-timeout", streamable.DefaultIdleTimeout, "end an HTTP session that has had no request, and no message on its event stream, for this long (an open event stream alone does not keep it)")
	fs.StringVar(&o.http.tokenFile, "http-token-file", "", "the bearer token every HTTP request must carry (Authorization: Bearer TOKEN) is in this `FILE` (mode 0600; at least 32 characters); "+
		"when it does not exist, a random one is written to it; default <state-dir>/"+httpTokenName)
	setFlagGroup(fs, flagsHTTP, "http", "tls-cert", "tls-key", "http-max-sessions", "http-idle-timeout", "http-token-file")
}

// httpFlags are the flags that apply to --http only.
var httpFlags = []string{"tls-cert", "tls-key", "http-max-sessions", "http-idle-timeout", "http-token-file"}

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
		for _, f := range httpFlags {
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
	var (
		ep               httpEndpoint
		token, tokenFile string
		tokenCreated     bool
	)
	s, err := prepareServe(o, stderr, func(*setup) error {
		var err error
		// The certificate and the token are read before the broker is
		// confined.
		if ep, err = o.endpoint(); err != nil {
			return err
		}
		token, tokenFile, tokenCreated, err = o.httpToken()
		return err
	})
	if err != nil {
		return err
	}
	defer s.close()
	identity := s.rt.PinnedID()
	if identity == "" {
		identity = tokenIdentity(token)
	}
	srv, err := streamable.NewServer(streamable.Config{
		Token: token,
		NewSession: func(stream jsonrpc.RoutedStream) (func(context.Context) error, error) {
			cfg := serveConfig(s, "http")
			cfg.PinnedID = identity // the token's: a declared clientInfo.name selects nothing
			if streamable.Stateless(stream) {
				// It serves every 2026-07-28 client: each request the
				// transport admits runs at once, and is read at once, so none
				// waits behind another client's consent.
				cfg.ConnOptions = append(cfg.ConnOptions, jsonrpc.WithMaxInFlight(streamable.MaxStatelessRequests),
					jsonrpc.WithMaxQueued(jsonrpc.DefaultMaxQueued, 2*streamable.MaxStatelessBytes))
			}
			sess, err := serve.NewSession(stream, cfg)
			if err != nil {
				cfg.Corridor.Close()
				return nil, err
			}
			return sess.Run, nil
		},
		Versions:        serve.SupportedVersions,
		ModernVersions:  serve.ModernVersions, // one serve session answers them all, under the token's identity
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
	hs := newHTTPServer(srv, ep.tls, s.log)
	served := make(chan error, 1)
	scheme := "http"
	if ep.tls != nil {
		scheme = "https"
		go func() { served <- hs.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- hs.Serve(ln) }()
	}
	if tokenCreated {
		s.log.Info("wrote a new bearer token for HTTP clients", "tokenFile", tokenFile)
	}
	s.log.Info("HTTP clients must send Authorization: Bearer with the token in the token file; each is served as the token's identity",
		"tokenFile", tokenFile, "identity", identity)
	logHTTPConsent(s, identity)
	s.log.Info("serving the filesystem tools over Streamable HTTP", "url", scheme+"://"+ln.Addr().String()+streamable.EndpointPath,
		"roots", s.rt.Roots().Len())
	if !ep.loopback {
		s.log.Warn("listening beyond this machine: whoever has the token and reaches " + ep.addr +
			" is served the roots; keep the token file private, and restrict who can connect (firewall)")
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
	if o.http.addr != "" {
		return true
	}
	for _, f := range httpFlags {
		if o.set[f] {
			return true
		}
	}
	return false
}

// httpToken is the bearer token of serve --http: the token file's, or,
// when the file does not exist, a fresh random one (streamable.NewToken)
// written to it with mode 0600 (whole, then linked into place; another
// process that wins the race to create it gives the token). The token
// file must be a regular file that only its owner can read or write, and
// hold one token (streamable.CheckToken). Errors are configErrors naming
// the file and the fix.
func (o *options) httpToken() (token, path string, created bool, err error) {
	path, setting := o.http.tokenFile, "--http-token-file"
	if path == "" {
		path, setting = filepath.Join(o.stateDir, httpTokenName), "the token file (no --http-token-file)"
		if err := os.MkdirAll(o.stateDir, 0o700); err != nil {
			return "", "", false, configErrorf("--state-dir %s: %v", o.stateDir, err)
		}
	}
	token = streamable.NewToken()
	switch err := atomicfile.Create(path, []byte(token+"\n"), 0o600); {
	case err == nil:
		return token, path, true, nil
	case !errors.Is(err, fs.ErrExist):
		return "", "", false, configErrorf("%s %s: cannot write a token to it: %v", setting, path, err)
	}
	token, err = readTokenFile(path)
	if err != nil {
		return "", "", false, configErrorf("%s %s: %v", setting, path, err)
	}
	return token, path, false, nil
}

// readTokenFile reads the token in an existing token file.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	if goruntime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("others can read or write it (mode %#o): chmod 600 %s", fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes))
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(data))
	if err := streamable.CheckToken(token); err != nil {
		return "", fmt.Errorf("%v; write one with, say, openssl rand -hex 32 > %s (or remove the file, and fsbroker writes one)", err, path)
	}
	return token, nil
}

// tokenIdentity is the identity of the HTTP sessions when the operator
// pinned none (--client-id): "http-" and 16 hex digits of a SHA-256 of the
// token. It is the token's, whatever name a client declares, and stays the
// same for as long as the token does; a new token is a new identity, with
// none of the old one's grants.
func tokenIdentity(token string) string {
	sum := sha256.Sum256([]byte("fsbroker serve --http client identity\n" + token))
	return "http-" + hex.EncodeToString(sum[:8])
}

// logHTTPConsent says at start what consent means over HTTP: the default
// (no --consent) approves nothing that is not pre-approved or granted; elicit
// and auto let whoever holds the token approve its own access.
func logHTTPConsent(s *setup, identity string) {
	switch s.opts.consentSpec {
	case "":
		s.log.Info("consent over HTTP: nobody is asked (no --consent): only pre-approved roots and the grants of the token's identity are served",
			"identity", identity)
	case consent.NameElicit:
		s.log.Warn("--consent elicit over HTTP: each consent question goes to the HTTP client that asked for the access, " +
			"so whoever holds the token approves its own access")
	case consent.NameAuto:
		s.log.Warn("--consent auto over HTTP: every approvable path an HTTP client asks for is approved")
	}
}

// newHTTPServer is the HTTP server of fsbroker serve --http and fsbroker
// console: h over tlsConfig (nil: plain HTTP), with bounds on the headers'
// time and size and on idle connections, its own errors logged at debug.
func newHTTPServer(h http.Handler, tlsConfig *tls.Config, log hclog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
}

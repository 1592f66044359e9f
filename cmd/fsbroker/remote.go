// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/transport/remote"
)

// remoteConfig is the config file's remote member: the MCP server that
// connect serves over Streamable HTTP (see docs/remote.md).
type remoteConfig struct {
	URL     string         `json:"url"`
	Headers []headerConfig `json:"headers"`
	CA      string         `json:"ca"`
}

// headerConfig is one extra header for the remote server. Its value may
// name environment variables as ${NAME}.
type headerConfig struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// noServerMessage is connect's usage error when it has nothing to serve.
const noServerMessage = "connect needs the server command after --, as in: fsbroker connect --root DIR -- CMD ARGS; " +
	"or a remote server: fsbroker connect --root DIR --url URL (or remote.url in the config file)"

// registerRemoteFlags adds connect's flags for a remote server.
func registerRemoteFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.remoteURL, "url", "", "serve the remote MCP server at `URL` (http or https) over Streamable HTTP instead of starting a command; see docs/remote.md")
	fs.StringVar(&o.remoteCA, "ca", "", "PEM `FILE` of the CA certificates the remote server's certificate must chain to (default: the system's roots)")
	// A Func flag whose errors would quote the value (a secret) is not
	// used: the value is checked when the stream is made, and errors name
	// the header only.
	fs.Func("header", "send the header `'NAME: VALUE'` with every request to the remote server (authentication, say); repeatable; never logged, but a command line is visible to other users: prefer the config file's remote.headers with ${ENV} values",
		func(v string) error {
			o.remoteHeaders = append(o.remoteHeaders, v)
			return nil
		})
}

// mergeRemote takes the config's remote url and ca for the flags not given
// (the headers are read when the stream is made, since only connect needs
// their environment variables).
func (o *options) mergeRemote(c *fileConfig) {
	if c.Remote == nil {
		return
	}
	if !o.set["url"] {
		o.remoteURL = c.Remote.URL
	}
	if c.Remote.CA != "" && !o.set["ca"] {
		o.remoteCA = c.Remote.CA
		if !filepath.IsAbs(o.remoteCA) {
			o.remoteCA = filepath.Join(filepath.Dir(o.configPath), o.remoteCA)
		}
	}
}

// runRemote is connect for a remote server: --url (or the config's
// remote.url) instead of a command.
func runRemote(ctx context.Context, o *options, rest []string, stderr io.Writer) error {
	if len(rest) > 0 && o.remoteURL != "" {
		return configErrorf("connect serves either a server command (after --) or a remote server (--url), not both")
	}
	if o.remoteURL == "" && o.configPath == "" {
		return configErrorf(noServerMessage)
	}
	s, err := prepare(o, stderr, remoteCheck)
	if err != nil {
		return err
	}
	defer s.close()
	stream := s.remote
	if err := s.rt.Confine(nil, false); err != nil {
		return err
	}
	s.log.Info("serving a remote server", "url", stream.URL(), "roots", s.rt.Roots().Len())
	// A POST that hangs, or keeps being retried, must not hold fsbroker once
	// it is told to stop: in-flight replies get the shutdown timeout, then
	// the stream is closed under them.
	served := make(chan struct{})
	go func() {
		select {
		case <-served:
		case <-ctx.Done():
			select {
			case <-served:
			case <-time.After(o.shutdownTimeout):
				_ = stream.Close()
			}
		}
	}()
	err = s.serveView(ctx, stream, nil, broker.WithTransport("http"))
	close(served)
	_ = stream.Close()
	return err
}

// remoteCheck is what prepare checks for a remote server, before it loads
// the policies: a URL is given (--url, or the config's remote.url), and the
// remote settings make a stream (no request is made yet), which s.remote
// holds from then on: s.close closes it, also when the runtime then fails
// to open.
func remoteCheck(s *setup) error {
	if s.opts.remoteURL == "" {
		return configErrorf(noServerMessage)
	}
	stream, err := s.openRemote()
	if err != nil {
		return err
	}
	s.remote = stream
	return nil
}

// openRemote makes the stream to the remote server from the options.
func (s *setup) openRemote() (*remote.Stream, error) {
	o := s.opts
	urlFrom := "--url"
	if !o.set["url"] {
		urlFrom = fmt.Sprintf("config %s: /remote/url", o.configPath)
	}
	headers := http.Header{}
	if s.cfg != nil && s.cfg.Remote != nil {
		for i, h := range s.cfg.Remote.Headers {
			where := fmt.Sprintf("config %s: /remote/headers/%d", o.configPath, i)
			value, err := expandEnv(h.Value)
			if err != nil {
				return nil, configErrorf("%s (%s): %v", where, h.Name, err)
			}
			if err := remote.CheckHeader(h.Name, value); err != nil {
				return nil, configErrorf("%s: %v", where, err)
			}
			headers.Add(h.Name, value)
		}
	}
	fromFlags := map[string]bool{}
	for i, raw := range o.remoteHeaders {
		name, value, ok := strings.Cut(raw, ":")
		name, value = strings.TrimSpace(name), strings.TrimLeft(value, " \t")
		if !ok || name == "" {
			return nil, configErrorf("--header number %d: want 'NAME: VALUE'", i+1)
		}
		if err := remote.CheckHeader(name, value); err != nil {
			return nil, configErrorf("--header: %v", err)
		}
		// A header on the command line replaces the config file's.
		if key := http.CanonicalHeaderKey(name); !fromFlags[key] {
			headers.Del(key)
			fromFlags[key] = true
		}
		headers.Add(name, value)
	}
	opts := []remote.Option{
		remote.WithHeaders(headers),
		remote.WithLogger(s.log.Named("http")),
		remote.WithMaxMessageBytes(o.maxMessageBytes),
		remote.WithCloseTimeout(o.shutdownTimeout),
	}
	if o.remoteCA != "" {
		caFrom := "--ca"
		if !o.set["ca"] {
			caFrom = fmt.Sprintf("config %s: /remote/ca", o.configPath)
		}
		pool, err := remote.CertPool(o.remoteCA)
		if err != nil {
			return nil, configErrorf("%s: %v", caFrom, err)
		}
		opts = append(opts, remote.WithRootCAs(pool))
	}
	stream, err := remote.New(o.remoteURL, opts...)
	if err != nil {
		return nil, configErrorf("%s: %v", urlFrom, err)
	}
	return stream, nil
}

// envReference is ${NAME} in a header value.
var envReference = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces each ${NAME} in a header value with the environment
// variable's value, so that a secret need not be written in the config file.
// A variable that is unset or empty is an error (naming the variable only).
func expandEnv(value string) (string, error) {
	var missing string
	out := envReference.ReplaceAllStringFunc(value, func(ref string) string {
		name := envReference.FindStringSubmatch(ref)[1]
		v := os.Getenv(name)
		if v == "" && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("the environment variable %s is not set", missing)
	}
	return out, nil
}

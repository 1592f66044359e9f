// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/metrics"
	"github.com/fsbroker/fsbroker/broker/runtime"
	"github.com/fsbroker/fsbroker/console"
)

// consoleTool is how the console's revocations and restores name it in the
// audit trail and in the blocks it makes.
const consoleTool = "fsbroker console"

const consoleLong = `Serve a web page for the person at this machine, over every broker on a state
directory: consent requests as they arrive (brokers started with --consent console
wait for the answer given here), live activity from the audit trail, the grants
and blocks with buttons that revoke and lift them (as fsbroker grants revoke and
restore do, in running brokers within a second), and a search of the trail with
its verification status. See docs/console.md.

The page is served on loopback only (default: a free port of 127.0.0.1), behind
a random token: the address to open, printed once on stdout, holds it, and a
request without it gets 401. A --listen address other than loopback is served
only over TLS (--tls-cert and --tls-key). The state directory is --state-dir,
else the stateDir of --config FILE, else the default, as the brokers resolve it;
its consent queue (<state-dir>/consent) must be private to this user (mode 0700).

Exit status: 0 stopped by SIGINT or SIGTERM; 1 the server failed; 2 bad flags,
a non-loopback --listen without TLS, or a state directory others could write.`

const consoleExample = `  # The console of the brokers started with the default state directory
  fsbroker console

  # A broker that asks the person at the console, and the console of its state
  fsbroker stdio --consent console --state-dir ~/.fsb --root ~/notes
  fsbroker console --state-dir ~/.fsb --config ~/.fsb/fsbroker.yaml

  # On the network, over TLS
  fsbroker console --listen 192.0.2.10:8443 --tls-cert console.pem --tls-key console-key.pem`

// newConsoleCommand returns `fsbroker console`.
func newConsoleCommand() *cobra.Command {
	return leafCommand(&cobra.Command{
		Use:     "console",
		Short:   "a web page for consent, live activity, grants and the audit trail",
		Long:    consoleLong,
		Example: consoleExample,
		Args:    noArgs,
	}, consoleFlags)
}

// consoleFlags registers the flags of `fsbroker console` and returns what runs it.
func consoleFlags(fs *pflag.FlagSet) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		tf                      trailFlags
		kf                      keyFlags
		rootFlags               []string
		listen, tlsCert, tlsKey string
		logLevel                string
	)
	fs.StringVar(&listen, "listen", "", "serve the page on `HOST:PORT` (default "+console.DefaultListen+": a free port of loopback); a HOST other than a loopback address or localhost needs --tls-cert and --tls-key")
	fs.StringVar(&tlsCert, "tls-cert", "", "serve over TLS with the certificate (and chain) in this PEM `FILE`")
	fs.StringVar(&tlsKey, "tls-key", "", "the PEM `FILE` of the --tls-cert certificate's private key")
	tf.register(fs)
	kf.register(fs, true)
	rootFlag(fs, &rootFlags, "the pre-approved roots are shown, and a block records the directory its path's mount names")
	fs.StringVar(&logLevel, "log-level", "info", "the log's `LEVEL` on stderr: trace, debug, info, warn or error")
	return func(ctx context.Context, _ []string, stdout, stderr io.Writer) error {
		level := hclog.LevelFromString(logLevel)
		if level == hclog.NoLevel {
			return configErrorf("--log-level %q: want trace, debug, info, warn or error", logLevel)
		}
		log := hclog.New(&hclog.LoggerOptions{Name: "fsbroker.console", Level: level, Output: stderr})
		if err := tf.applyConfig(); err != nil {
			return err
		}
		state, err := tf.state()
		if err != nil {
			return err
		}
		tf.stateDir = state
		auditDir := runtime.Audit{Dir: tf.auditPath}.DirIn(state)
		ep, err := console.NewEndpoint(listen, tlsCert, tlsKey)
		if err != nil {
			return configErrorf("%v", err)
		}
		current, err := brokerRoots(tf.configPath, rootFlags)
		if err != nil {
			return err
		}
		queue, err := consent.OpenQueue(state)
		if err != nil {
			return configErrorf("--state-dir %s: %v", state, err)
		}
		store, err := grants.Open(filepath.Join(state, grants.DirName), grants.WithLogger(log.Named("grants")))
		if err != nil {
			return configErrorf("--state-dir %s: %v", state, err)
		}
		defer store.Close()
		changes := &grantsTrail{tf: &tf}
		defer changes.close(log)
		ln, err := ep.Listen()
		if err != nil {
			return configErrorf("%v", err)
		}
		defer ln.Close()
		srv, err := console.New(console.Config{
			Metrics:  metrics.New(metrics.Options{StateDir: state, AuditDir: auditDir}),
			StateDir: state,
			Queue:    queue,
			Grants:   store,
			AuditDir: auditDir,
			Roots:    current,
			Keys: func() (audit.VerifyKeys, error) {
				macKeys, _, err := kf.loadFrom(&tf)
				if err != nil {
					return audit.VerifyKeys{}, err
				}
				pubs, err := audit.LoadPublishedKeys(auditDir)
				if err != nil {
					return audit.VerifyKeys{}, fmt.Errorf("no checkpoint public key: %w", err)
				}
				return audit.VerifyKeys{MAC: macKeys, Checkpoint: pubs}, nil
			},
			Revoke: func(f grants.RevokeFilter) (console.Change, error) {
				r := revoke(store, f, blocksOf(f, current, consoleTool+" by "+operator()))
				errs := append(r.blockErrs, r.revokeErr)
				if recs := r.records(consoleTool); len(recs) > 0 {
					if err := changes.record(recs); err != nil {
						errs = append(errs, fmt.Errorf("revoked, but the audit trail does not show it: %w", err))
					}
				}
				return console.Change{Revoked: len(r.revoked), Blocked: len(r.added) + len(r.kept)}, errors.Join(errs...)
			},
			Restore: func(f grants.RevokeFilter) (console.Change, error) {
				restored, err := restoreBoth(store, f)
				if len(restored) > 0 {
					if rerr := changes.record(blockRecords("grants/restore", true, restored, consoleTool)); rerr != nil {
						err = errors.Join(err, fmt.Errorf("lifted, but the audit trail does not show it: %w", rerr))
					}
				}
				return console.Change{Lifted: len(restored)}, err
			},
			Endpoint: ep,
			Log:      log,
		}, ln.Addr())
		if err != nil {
			return err
		}
		return serveConsole(ctx, srv, ln, ep, stdout, log)
	}
}

// serveConsole serves the console on ln until ctx ends (SIGINT, SIGTERM),
// after printing the address to open, once.
func serveConsole(ctx context.Context, srv *console.Server, ln net.Listener, ep console.Endpoint, stdout io.Writer, log hclog.Logger) error {
	// The event streams end with the server: their requests' context is
	// this one.
	serveCtx, stop := context.WithCancel(context.Background())
	defer stop()
	hs := newHTTPServer(srv, ep.TLS, log)
	hs.BaseContext = func(net.Listener) context.Context { return serveCtx }
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(serveCtx) }()
	served := make(chan error, 1)
	go func() {
		if ep.TLS != nil {
			served <- hs.ServeTLS(ln, "", "")
		} else {
			served <- hs.Serve(ln)
		}
	}()
	if _, err := fmt.Fprintf(stdout, "fsbroker console: open %s\n", srv.URL()); err != nil {
		stop()
		return fmt.Errorf("write: %w", err)
	}
	log.Info("serving the console", "address", ln.Addr().String(), "tls", ep.TLS != nil)
	var err error
	select {
	case <-ctx.Done():
		log.Info("stopping")
	case err = <-served:
	case err = <-runErr:
	}
	stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := hs.Shutdown(shutdownCtx); serr != nil {
		_ = hs.Close()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("the console failed", "error", err)
		return errAlreadyLogged
	}
	return nil
}

// grantsTrail records the console's revocations and restores in the audit
// trail as fsbroker grants revoke and restore record theirs (the same
// records, synced at each), through one writer opened at the first change
// and kept until the console stops: one segment for all of them, where
// each run of the commands (one change a process) opens its own.
type grantsTrail struct {
	tf *trailFlags
	mu sync.Mutex
	w  *audit.Writer // nil until the first change, or after a failed one
}

// record appends recs, opening the writer if need be. A writer that failed
// is closed, and the next change opens another.
func (g *grantsTrail) record(recs []audit.Record) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil {
		w, err := openGrantsTrail(g.tf)
		if err != nil {
			return err
		}
		g.w = w
	}
	for _, rec := range recs {
		if _, err := g.w.Append(context.Background(), rec); err != nil {
			_ = g.w.Close()
			g.w = nil
			return err
		}
	}
	return nil
}

// close closes the writer, if a change opened it.
func (g *grantsTrail) close(log hclog.Logger) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		if err := g.w.Close(); err != nil {
			log.Error("the audit trail of the console's changes did not close cleanly", "error", err)
		}
		g.w = nil
	}
}

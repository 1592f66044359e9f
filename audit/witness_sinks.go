// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// WitnessSpec is a parsed witness setting (--audit-witness SPEC, audit.witness in the config
// file):
//
//	syslog                       the local syslog socket (/dev/log; journald reads it too)
//	syslog:udp://HOST:PORT       a syslog server over UDP
//	syslog:tcp://HOST:PORT       a syslog server over TCP
//	syslog:unixgram:///PATH      a syslog daemon's datagram socket at PATH (unix:///PATH: stream)
//	file:PATH                    an append-only file
type WitnessSpec struct {
	// Spec is the setting as given.
	Spec string
	// Syslog: Network and Addr as log/syslog.Dial takes them ("" and "" for the local socket).
	Syslog           bool
	Network, Address string
	// Path is the file of a file witness.
	Path string
}

// ParseWitnessSpec parses a witness setting. A relative file path is relative to base (the
// working directory for a flag, the config file's directory for the config file).
func ParseWitnessSpec(spec, base string) (WitnessSpec, error) {
	ws := WitnessSpec{Spec: spec}
	switch {
	case spec == "syslog":
		ws.Syslog = true
		return ws, nil
	case strings.HasPrefix(spec, "syslog:"):
		u, err := url.Parse(strings.TrimPrefix(spec, "syslog:"))
		if err != nil {
			return ws, fmt.Errorf("audit witness %q: %w", spec, err)
		}
		ws.Syslog, ws.Network = true, u.Scheme
		switch u.Scheme {
		case "udp", "tcp":
			if u.Host == "" || u.Port() == "" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
				return ws, fmt.Errorf("audit witness %q: want syslog:%s://HOST:PORT", spec, u.Scheme)
			}
			ws.Address = u.Host
		case "unix", "unixgram":
			if u.Host != "" || !filepath.IsAbs(u.Path) || u.RawQuery != "" {
				return ws, fmt.Errorf("audit witness %q: want syslog:%s:///ABSOLUTE/PATH", spec, u.Scheme)
			}
			ws.Address = u.Path
		default:
			return ws, fmt.Errorf("audit witness %q: want syslog, syslog:udp://HOST:PORT, syslog:tcp://HOST:PORT or syslog:unixgram:///PATH", spec)
		}
		return ws, nil
	case strings.HasPrefix(spec, "file:"):
		p := strings.TrimPrefix(spec, "file:")
		if p == "" {
			return ws, fmt.Errorf("audit witness %q: want file:PATH", spec)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return ws, fmt.Errorf("audit witness %q: %w", spec, err)
		}
		ws.Path = abs
		return ws, nil
	}
	return ws, fmt.Errorf("audit witness %q: want syslog, syslog:udp://HOST:PORT, syslog:tcp://HOST:PORT, syslog:unixgram:///PATH or file:PATH", spec)
}

// String returns the setting: the spec with a file witness's path made absolute.
func (ws WitnessSpec) String() string {
	if ws.Path != "" {
		return "file:" + ws.Path
	}
	return ws.Spec
}

// Open returns the witness the spec names. A file witness's file is created (mode 0640) if it
// does not exist, in a directory that must; it must be a regular file. A syslog witness
// connects now if it can, else at its first statement: a syslog daemon that is down at start
// is a failed delivery, not a start-up error.
func (ws WitnessSpec) Open() (Witness, error) {
	if ws.Syslog {
		return newSyslogWitness(ws)
	}
	return newFileWitness(ws.Path)
}

// fileWitness appends each statement, as one line, to a file: opened with O_APPEND for every
// statement (so that a file rotated away is followed, and one made append-only with chattr +a
// is written as it allows), written with one write, fsynced and closed.
type fileWitness struct{ path string }

// newFileWitness checks that path can be appended to and is a regular file.
func newFileWitness(path string) (*fileWitness, error) {
	f, err := openWitnessFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit witness file:%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("audit witness file:%s: %w", path, err)
	}
	return &fileWitness{path: path}, nil
}

// openWitnessFile opens path for appending, never through a symbolic link
// as its last name, and only when it is a regular file: a link or FIFO
// swapped in since the broker started is refused on every statement.
func openWitnessFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, witnessOpenFlags, 0o640)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Send appends ev's line. The open can block (a FIFO, a hung network file system): the writer's
// timeout bounds the wait.
func (w *fileWitness) Send(ctx context.Context, ev WitnessEvent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := openWitnessFile(w.path)
	if err != nil {
		return fmt.Errorf("audit witness file:%s: %w", w.path, err)
	}
	_, err = f.Write([]byte(ev.Line() + "\n"))
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err != nil {
		return fmt.Errorf("audit witness file:%s: %w", w.path, err)
	}
	return nil
}

// String returns file:PATH.
func (w *fileWitness) String() string { return "file:" + w.path }

// Close does nothing: the file is open only while a statement is written.
func (w *fileWitness) Close() error { return nil }

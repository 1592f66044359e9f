// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package sandbox confines a process with Landlock: the MCP server that
// fsbroker connect and wrap start (so that the files it opens itself stay
// within the operator's roots), and the broker process itself.
//
// A [Rules] value lists the paths a confined process may use: Read paths
// (and everything beneath them) may be read and executed, Write paths may
// also be changed as a whole (written, created, removed, truncated, renamed
// between their directories). [Restrict] applies rules to the calling
// process with the highest Landlock ABI the kernel offers; the kernel then
// refuses everything else with EACCES, whatever path is used. The server is
// confined through a re-executed helper ([NewChild], [RunHelper]), so that
// the broker is never bound by the server's rules. See docs/sandbox.md.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mode is how --sandbox asks for confinement.
type Mode string

const (
	// Off confines nothing.
	Off Mode = "off"
	// On confines, and refuses to start without Landlock.
	On Mode = "on"
	// BestEffort confines where Landlock exists and runs unconfined where it
	// does not, saying which.
	BestEffort Mode = "best-effort"
)

// ParseMode reads a --sandbox value (or the config file's sandbox.mode):
// "on" (or "true", as a bare --sandbox gives), "best-effort", or "off" (or
// "false").
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "on", "true":
		return On, nil
	case "best-effort":
		return BestEffort, nil
	case "off", "false", "":
		return Off, nil
	}
	return "", fmt.Errorf("sandbox mode %q: want on, best-effort or off", s)
}

// ErrUnavailable is the error of confining where the kernel has no Landlock
// (not built in, not enabled at boot, or not Linux).
var ErrUnavailable = errors.New("Landlock is not available on this system (Linux 5.13 or later with Landlock enabled at boot, lsm=landlock)")

// Rules are the paths a confined process may use. Paths that do not exist
// are left out when the rules are applied.
type Rules struct {
	// Read paths may be read and executed: a directory with everything
	// beneath it, or one file.
	Read []string `json:"read,omitempty"`
	// Write paths may also be changed: files written and truncated, entries
	// created, removed and renamed anywhere beneath a directory (ioctl on
	// devices included).
	Write []string `json:"write,omitempty"`
}

// With returns r with more's paths added.
func (r Rules) With(more Rules) Rules {
	return Rules{Read: append(slices.Clone(r.Read), more.Read...), Write: append(slices.Clone(r.Write), more.Write...)}
}

// Describe lists the rules one a line, as docs/sandbox.md shows them:
// "read  PATH" and "write PATH", in the order given, absolute and clean,
// without repeats.
func (r Rules) Describe() string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, list := range []struct {
		word  string
		paths []string
	}{{"write", r.Write}, {"read ", r.Read}} {
		for _, p := range list.paths {
			key := list.word + clean(p)
			if seen[key] {
				continue
			}
			seen[key] = true
			fmt.Fprintf(&b, "%s %s\n", list.word, clean(p))
		}
	}
	return b.String()
}

func clean(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// DefaultSystemPaths are the paths a program needs to start, readable and
// executable: the system's programs and libraries, the few files of /etc
// that the C library, TLS and time zones read, /proc, and the parts of /sys
// that language runtimes read for the CPU count and memory limits. Not
// /etc as a whole, not /home, not /tmp, not /run, not /var. python3, node
// and a static Go binary start with these alone.
func DefaultSystemPaths() []string {
	return []string{
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload",
		"/etc/localtime", "/etc/timezone",
		"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies",
		"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
		"/etc/services", "/etc/protocols", "/etc/passwd", "/etc/group", "/etc/mime.types",
		"/proc",
		"/sys/devices/system/cpu", "/sys/fs/cgroup", "/sys/kernel/mm/transparent_hugepage",
	}
}

// DefaultDevices are the device files every program may read and write:
// /dev/null, /dev/zero, /dev/full, /dev/random and /dev/urandom.
func DefaultDevices() []string {
	return []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}
}

// Root is one of the operator's roots, as the sandbox sees it.
type Root struct {
	Path     string
	Writable bool
}

// Config is the sandbox section of the config file: System replaces the
// default system paths when it is not nil; Read and Write add paths;
// UnixSockets says whether the server may create UNIX sockets ("": deny).
type Config struct {
	System      []string
	Read        []string
	Write       []string
	UnixSockets UnixSockets
}

// UnixSockets says whether a confined server may create UNIX sockets with
// socket(2). Landlock restricts connecting to a socket by path only from
// ABI 9 (LANDLOCK_ACCESS_FS_RESOLVE_UNIX), and to an abstract one only from
// ABI 6 (a scope): before, a server confined to its roots could still reach
// the session bus, an SSH agent or a container engine through their sockets.
type UnixSockets string

const (
	// UnixSocketsDeny (the default): socket(AF_UNIX, ...) fails with EACCES,
	// so the server connects to no UNIX socket, by path or abstract name,
	// and listens on none; socketpair(2) of datagram sockets fails with
	// EACCES too (an end sends to any datagram socket at a path), while
	// stream and seqpacket pairs still work (the pipes between a runtime's
	// own processes, as node and python make them). io_uring is refused too
	// (ENOSYS), since a ring creates sockets without socket(2).
	UnixSocketsDeny UnixSockets = "deny"
	// UnixSocketsAllow: the server may create UNIX sockets; connecting by
	// path is then refused by Landlock only from ABI 9 (outside the server's
	// own sockets), and to an abstract socket from ABI 6.
	UnixSocketsAllow UnixSockets = "allow"
)

// ParseUnixSockets reads the config's sandbox.unixSockets: "deny" (or "")
// or "allow".
func ParseUnixSockets(s string) (UnixSockets, error) {
	switch UnixSockets(s) {
	case "", UnixSocketsDeny:
		return UnixSocketsDeny, nil
	case UnixSocketsAllow:
		return UnixSocketsAllow, nil
	}
	return "", fmt.Errorf("sandbox unixSockets %q: want deny or allow", s)
}

// ErrNoUnixSocketFilter is the error of UnixSocketsDeny where the filter
// that enforces it cannot be installed (not Linux, or an architecture it is
// not written for).
var ErrNoUnixSocketFilter = errors.New("the seccomp filter that denies UNIX sockets is not available (Linux on amd64, arm64 or riscv64)")

// ServerRules are the rules a server runs under: the system paths (the
// config's, else [DefaultSystemPaths]) and the config's Read paths
// readable, the read-only roots readable, the writable roots, the devices
// of [DefaultDevices] and the config's Write paths writable. The private
// temporary directory and the server's own executable are added by
// [NewChild].
func ServerRules(cfg Config, roots []Root) Rules {
	system := cfg.System
	if system == nil {
		system = DefaultSystemPaths()
	}
	r := Rules{Read: append(slices.Clone(system), cfg.Read...)}
	for _, root := range roots {
		if root.Writable {
			r.Write = append(r.Write, root.Path)
		} else {
			r.Read = append(r.Read, root.Path)
		}
	}
	r.Write = append(append(r.Write, DefaultDevices()...), cfg.Write...)
	return r
}

// Overlap is a read-only root that lies in (or is) a path the server may
// write: Landlock rules add up, so the outer path's write right covers the
// read-only root, and the kernel lets a confined server write it.
type Overlap struct {
	ReadOnly string // the read-only root
	Writable string // the writable root, or sandbox.write path, it lies in
	// Via is how the read-only root is reached from the writable path when
	// its path does not lie in it: "DIR, the same directory" (a directory
	// on the root's path that is the writable directory under another
	// name: a bind mount), or "the mount at DIR" (a mount under the
	// writable path that shows the root, a directory of it or one that
	// holds it). Empty when the root's path lies in the writable one.
	Via string
}

// String says what the overlap is, naming both paths, and how when the
// read-only root's path does not lie in the writable one.
func (o Overlap) String() string {
	s := fmt.Sprintf("the read-only root %s lies in the writable %s", o.ReadOnly, o.Writable)
	if o.Via != "" {
		s += " through " + o.Via
	}
	return s
}

// ReadOnlyInWritable returns every read-only root of roots that a path
// [ServerRules] makes writable (a writable root, or one of the config's
// Write paths) reaches: a confined server can write there, whatever the
// root's mode, because Landlock grants a right to every file below the
// directory it is given for, by whatever path it is reached. A writable
// path reaches a read-only root when
//   - the root's path lies in it, or is it (paths compared whole segment
//     by segment, after resolving symbolic links where they exist:
//     Landlock follows them to the directory it restricts);
//   - a directory on the root's path is the writable directory itself,
//     by device and inode (a bind mount gives it another name);
//   - a mount under the writable path (from /proc/self/mountinfo, on
//     Linux) shows a directory of the same file system that holds the
//     root or lies in it (a bind mount of the root, of a directory of it
//     or of one above it).
//
// Not detected: a hard link under a writable path to a file of the root
// (each file would have to be compared), and mounts made after the check.
func ReadOnlyInWritable(cfg Config, roots []Root) []Overlap {
	var writable []string
	for _, r := range roots {
		if r.Writable {
			writable = append(writable, r.Path)
		}
	}
	writable = append(writable, cfg.Write...)
	var out []Overlap
	mounts := readMounts()
	for _, r := range roots {
		if r.Writable {
			continue
		}
		ro := resolved(r.Path)
		for _, w := range writable {
			if via, ok := reaches(resolved(w), ro, mounts); ok {
				out = append(out, Overlap{ReadOnly: r.Path, Writable: w, Via: via})
			}
		}
	}
	return out
}

// reaches reports whether the writable directory w reaches the read-only
// root ro (both resolved), and how when ro's path does not lie in w (see
// [Overlap.Via]).
func reaches(w, ro string, mounts mountTable) (via string, ok bool) {
	if within(ro, w) {
		return "", true
	}
	if d := sameDirOnPath(ro, w); d != "" {
		return d + ", the same directory", true
	}
	if m := mounts.showing(ro, w); m != "" {
		return "the mount at " + m, true
	}
	return "", false
}

// sameDirOnPath returns the directory on p's path (p itself, or one of
// its ancestors) that is dir, by device and inode, or "" when there is
// none (or dir does not exist).
func sameDirOnPath(p, dir string) string {
	di, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	for d := p; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && os.SameFile(fi, di) {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// resolved is p absolute and clean, its symbolic links resolved where it
// exists.
func resolved(p string) string {
	p = clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// within reports whether path is dir or lies beneath it (both clean and
// absolute), by whole segments.
func within(path, dir string) bool {
	if path == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(path, dir+string(filepath.Separator))
}

// Status says how a process is confined.
type Status struct {
	// ABI is the Landlock ABI the rules were applied with; 0: not confined.
	ABI int
	// Reason is why a process is not confined (ABI 0).
	Reason string
}

// Confined reports whether the rules were applied.
func (s Status) Confined() bool { return s.ABI > 0 }

// String is the status as the log and the session_start record give it:
// "confined (Landlock ABI 7)", or "not confined: REASON".
func (s Status) String() string {
	if s.Confined() {
		return fmt.Sprintf("confined (Landlock ABI %d)", s.ABI)
	}
	return "not confined: " + s.Reason
}

// Command probe is a fake MCP server that opens files itself, for the
// sandbox tests: it runs the probes its one argument lists (JSON), prints
// one line per probe to stderr ("probe NAME: ok", "probe NAME: EACCES" or
// "probe NAME: error ..."), then "probe done", then answers initialize and
// ping on stdin and stdout until its input ends. Built with CGO_ENABLED=0,
// it is a static Go binary.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// probe is one file operation to try.
type probe struct {
	Name string `json:"name"`
	// Op is read (a file), list (a directory), write (create or replace a
	// file), mkdir, rename (Path to To), exec (run Path), tmpwrite (a file
	// in $TMPDIR, Path unused), unix-connect (connect to the UNIX socket at
	// Path), unix-abstract (connect to the abstract UNIX socket named Path)
	// socketpair (a pair of connected UNIX sockets, Path unused),
	// pair-send (a pair of UNIX sockets of the type To names: stream,
	// seqpacket, dgram, raw, or one of them with "-flags" for
	// SOCK_NONBLOCK|SOCK_CLOEXEC; then a datagram sent from one end to the
	// socket at Path with sendto(2)), x32-socket (socket(2) of a UNIX
	// socket through amd64's x32 ABI) or fds (the descriptors above 2 this
	// process holds, from /proc/self/fd, other than the Go runtime's own:
	// an error naming each).
	Op   string `json:"op"`
	Path string `json:"path"`
	To   string `json:"to,omitempty"`
}

func main() {
	var probes []probe
	if len(os.Args) > 1 {
		if err := json.Unmarshal([]byte(os.Args[1]), &probes); err != nil {
			fmt.Fprintln(os.Stderr, "probe: bad argument:", err)
			os.Exit(2)
		}
	}
	for _, p := range probes {
		fmt.Fprintf(os.Stderr, "probe %s: %s\n", p.Name, outcome(run(p)))
	}
	fmt.Fprintln(os.Stderr, "probe done")
	serve()
}

func run(p probe) error {
	switch p.Op {
	case "read":
		_, err := os.ReadFile(p.Path)
		return err
	case "list":
		_, err := os.ReadDir(p.Path)
		return err
	case "write":
		return os.WriteFile(p.Path, []byte("written by the probe\n"), 0o644)
	case "mkdir":
		return os.Mkdir(p.Path, 0o755)
	case "rename":
		return os.Rename(p.Path, p.To)
	case "exec":
		return exec.Command(p.Path).Run()
	case "unix-connect", "unix-abstract":
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		defer syscall.Close(fd)
		name := p.Path
		if p.Op == "unix-abstract" {
			name = "@" + name // Go's spelling of a name in the abstract namespace
		}
		return os.NewSyscallError("connect", syscall.Connect(fd, &syscall.SockaddrUnix{Name: name}))
	case "x32-socket":
		// socket(AF_UNIX, SOCK_STREAM, 0) through amd64's x32 ABI.
		if runtime.GOARCH != "amd64" {
			return fmt.Errorf("x32 is amd64's, not %s", runtime.GOARCH)
		}
		const x32 = 0x40000000
		fd, _, errno := syscall.RawSyscall(syscall.SYS_SOCKET|x32, syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if errno != 0 {
			return os.NewSyscallError("socket (x32)", errno)
		}
		syscall.Close(int(fd))
		return nil
	case "socketpair":
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socketpair", err)
		}
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil
	case "pair-send":
		return pairSend(p.Path, p.To)
	case "fds":
		return heldDescriptors()
	case "tmpwrite":
		f, err := os.CreateTemp("", "probe-")
		if err != nil {
			return err
		}
		_, err = f.WriteString("temporary\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && filepath.Dir(f.Name()) != filepath.Clean(os.TempDir()) {
			err = fmt.Errorf("created %s outside $TMPDIR", f.Name())
		}
		return err
	}
	return fmt.Errorf("unknown op %q", p.Op)
}

// errToPeer is pair-send's outcome when the datagram addressed to a path
// went to the pair's other end instead (the kernel ignored the address).
var errToPeer = errors.New("sent to the peer, not to the address")

// pairSend makes a pair of UNIX sockets of the type typ names and sends a
// datagram from one end to the socket at path: nil when it left the pair
// (a socket at path got it), errToPeer when the other end got it, else the
// error of socketpair(2) or sendto(2).
func pairSend(path, typ string) error {
	types := map[string]int{"stream": syscall.SOCK_STREAM, "seqpacket": syscall.SOCK_SEQPACKET,
		"dgram": syscall.SOCK_DGRAM, "raw": syscall.SOCK_RAW}
	name, flags := typ, 0
	if base, ok := strings.CutSuffix(typ, "-flags"); ok {
		name, flags = base, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC
	}
	t, ok := types[name]
	if !ok {
		return fmt.Errorf("unknown socket type %q", typ)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, t|flags, 0)
	if err != nil {
		return os.NewSyscallError("socketpair", err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	if err := syscall.Sendto(fds[0], []byte("sent by the probe"), 0, &syscall.SockaddrUnix{Name: path}); err != nil {
		return os.NewSyscallError("sendto", err)
	}
	buf := make([]byte, 64)
	if n, _, err := syscall.Recvfrom(fds[1], buf, syscall.MSG_DONTWAIT); err == nil && n > 0 {
		return errToPeer
	}
	return nil
}

// heldDescriptors lists the descriptors above 2 this process holds (from
// /proc/self/fd, by what they lead to), leaving out the directory being read
// and anonymous inodes (the Go runtime's poller: its epoll and eventfd
// descriptors): an error naming each, nil when there is none.
func heldDescriptors() error {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	var held []string
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd <= 2 || uintptr(fd) == dir.Fd() {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + name)
		if err != nil || strings.HasPrefix(target, "anon_inode:") {
			continue
		}
		held = append(held, name+" -> "+target)
	}
	if len(held) > 0 {
		return fmt.Errorf("holds %s", strings.Join(held, ", "))
	}
	return nil
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errToPeer):
		return "peer"
	case errors.Is(err, syscall.EISCONN):
		return "EISCONN"
	case errors.Is(err, syscall.EACCES):
		return "EACCES"
	case errors.Is(err, syscall.EPERM):
		return "EPERM"
	}
	return "error " + err.Error()
}

// serve answers initialize and ping, and nothing else, until stdin ends.
func serve() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || len(m.ID) == 0 || m.Method == "" {
			continue
		}
		result := `{}`
		if m.Method == "initialize" {
			result = `{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"probe","version":"1"}}`
		}
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result)
	}
}

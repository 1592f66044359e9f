// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// auditArches are the architectures the UNIX socket filter is written for:
// little-endian, with socket(2) as a call of its own (not socketcall).
var auditArches = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
}

// UnixSocketFilterAvailable returns nil where [UnixSocketsDeny] can be
// enforced: a seccomp filter, on the architectures it is written for.
func UnixSocketFilterAvailable() error {
	if _, ok := auditArches[runtime.GOARCH]; !ok {
		return fmt.Errorf("%w on %s", ErrNoUnixSocketFilter, runtime.GOARCH)
	}
	return nil
}

// x32SyscallBit marks the calls of the x32 ABI on amd64.
const x32SyscallBit = 0x40000000

// unixSocketFilter is the seccomp program of UnixSocketsDeny for the audit
// architecture arch: socket(2) with the domain AF_UNIX fails with EACCES
// (sockets of every other domain are not touched); socketpair(2) with
// AF_UNIX fails with EACCES unless its type (without SOCK_NONBLOCK and
// SOCK_CLOEXEC) is SOCK_STREAM or SOCK_SEQPACKET, whose ends refuse or
// ignore a destination address: an end of a datagram pair (SOCK_DGRAM, or
// SOCK_RAW, which AF_UNIX makes a datagram socket) sends with sendto(2) to
// any datagram socket at a path, a send that Landlock checks only from ABI
// 9; io_uring_setup(2) fails with ENOSYS, as on a kernel built without
// io_uring (a ring can create sockets without calling socket(2)); a call
// of another architecture's ABI (a 32-bit program, or x32 on amd64, whose
// socketcall(2) the filter could not read) ends the process.
func unixSocketFilter(arch uint32, x32 bool) []unix.SockFilter {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		nr   = 0  // offsetof(struct seccomp_data, nr)
		aarc = 4  // offsetof(struct seccomp_data, arch)
		arg0 = 16 // offsetof(struct seccomp_data, args[0]), its low 32 bits on a little-endian machine
		arg1 = 24 // offsetof(struct seccomp_data, args[1]), the same
		// sockType is the type's part of socketpair's second argument, the
		// rest being SOCK_NONBLOCK and SOCK_CLOEXEC (the kernel's
		// SOCK_TYPE_MASK).
		sockType = 0xf
	)
	var (
		allow  = uint32(unix.SECCOMP_RET_ALLOW)
		kill   = uint32(unix.SECCOMP_RET_KILL_PROCESS)
		eacces = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EACCES)
		enosys = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	)
	p := []unix.SockFilter{
		{Code: ldW, K: aarc},
		{Code: jeq, K: arch, Jt: 1, Jf: 0},
		{Code: ret, K: kill},
		{Code: ldW, K: nr},
	}
	if x32 {
		p = append(p, unix.SockFilter{Code: jge, K: x32SyscallBit, Jt: 0, Jf: 1}, unix.SockFilter{Code: ret, K: kill})
	}
	// Each block below ends in returns of its own, so that every jump stays
	// inside its block or skips a whole block.
	return append(p,
		unix.SockFilter{Code: jeq, K: unix.SYS_IO_URING_SETUP, Jt: 0, Jf: 1},
		unix.SockFilter{Code: ret, K: enosys},

		unix.SockFilter{Code: jeq, K: unix.SYS_SOCKET, Jt: 0, Jf: 4}, // not socket(2): to the socketpair block
		unix.SockFilter{Code: ldW, K: arg0},
		unix.SockFilter{Code: jeq, K: unix.AF_UNIX, Jt: 0, Jf: 1},
		unix.SockFilter{Code: ret, K: eacces},
		unix.SockFilter{Code: ret, K: allow},

		unix.SockFilter{Code: jeq, K: unix.SYS_SOCKETPAIR, Jt: 0, Jf: 8}, // not socketpair(2): to the last allow
		unix.SockFilter{Code: ldW, K: arg0},
		unix.SockFilter{Code: jeq, K: unix.AF_UNIX, Jt: 0, Jf: 5}, // another domain: allow
		unix.SockFilter{Code: ldW, K: arg1},
		unix.SockFilter{Code: and, K: sockType},
		unix.SockFilter{Code: jeq, K: unix.SOCK_STREAM, Jt: 2, Jf: 0},
		unix.SockFilter{Code: jeq, K: unix.SOCK_SEQPACKET, Jt: 1, Jf: 0},
		unix.SockFilter{Code: ret, K: eacces},
		unix.SockFilter{Code: ret, K: allow},

		unix.SockFilter{Code: ret, K: allow},
	)
}

// denyUnixSockets installs the filter of UnixSocketsDeny on every thread of
// the calling process (and what it executes from now on): it can no longer
// create a UNIX socket, so it connects to none, by path or abstract name,
// nor a pair of datagram sockets, so it sends to none; it may still make a
// connected pair of stream or seqpacket sockets, which reach nothing else.
// no_new_privs is set first, as seccomp requires of an unprivileged process.
func denyUnixSockets() error {
	arch, ok := auditArches[runtime.GOARCH]
	if !ok {
		return UnixSocketFilterAvailable()
	}
	filter := unixSocketFilter(arch, runtime.GOARCH == "amd64")
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	runtime.LockOSThread() // the exec that follows runs on this thread, under the filter
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	r1, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: %w", errno)
	case r1 != 0:
		return fmt.Errorf("seccomp: thread %d could not take the filter", r1)
	}
	return nil
}

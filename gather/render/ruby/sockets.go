package ruby

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock (ABI 7 on the 6.18 kernels we run) confines TCP but neither UDP
// nor connecting to a named UNIX socket, and a network namespace leaves
// named UNIX sockets (a container engine's) reachable. A seccomp filter
// refusing socket(2) closes both, unprivileged: templates need no socket.
// Like the Landlock domain it is the starting thread's alone and passes to
// Ruby.

// auditArch is the seccomp architecture of the syscall numbers below;
// syscalls of any other (i386 on amd64) are refused too.
var auditArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}

// denySockets installs the filter on the calling thread (no_new_privs must
// be set).
func denySockets() error {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("no seccomp filter for %s: templates could open sockets", runtime.GOARCH)
	}
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		deny = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
	)
	// seccomp_data: nr at offset 0, arch at 4.
	filter := []unix.SockFilter{
		{Code: ldW, K: 4},
		{Code: jeq, Jt: 1, K: arch},
		{Code: ret, K: deny},
		{Code: ldW, K: 0},
		{Code: jge, Jt: 2, K: 0x40000000}, // x32 numbers on amd64
		{Code: jeq, Jt: 1, K: unix.SYS_SOCKET},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ret, K: deny},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

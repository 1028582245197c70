package runtime

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
)

// Capabilities by the names bpm.yml uses (with or without CAP_).
var Capabilities = map[string]uintptr{
	"CHOWN": unix.CAP_CHOWN, "DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
	"FOWNER": unix.CAP_FOWNER, "FSETID": unix.CAP_FSETID, "KILL": unix.CAP_KILL, "SETGID": unix.CAP_SETGID,
	"SETUID": unix.CAP_SETUID, "SETPCAP": unix.CAP_SETPCAP, "LINUX_IMMUTABLE": unix.CAP_LINUX_IMMUTABLE,
	"NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE, "NET_BROADCAST": unix.CAP_NET_BROADCAST, "NET_ADMIN": unix.CAP_NET_ADMIN,
	"NET_RAW": unix.CAP_NET_RAW, "IPC_LOCK": unix.CAP_IPC_LOCK, "IPC_OWNER": unix.CAP_IPC_OWNER, "SYS_MODULE": unix.CAP_SYS_MODULE,
	"SYS_RAWIO": unix.CAP_SYS_RAWIO, "SYS_CHROOT": unix.CAP_SYS_CHROOT, "SYS_PTRACE": unix.CAP_SYS_PTRACE, "SYS_PACCT": unix.CAP_SYS_PACCT,
	"SYS_ADMIN": unix.CAP_SYS_ADMIN, "SYS_BOOT": unix.CAP_SYS_BOOT, "SYS_NICE": unix.CAP_SYS_NICE, "SYS_RESOURCE": unix.CAP_SYS_RESOURCE,
	"SYS_TIME": unix.CAP_SYS_TIME, "SYS_TTY_CONFIG": unix.CAP_SYS_TTY_CONFIG, "MKNOD": unix.CAP_MKNOD, "LEASE": unix.CAP_LEASE,
	"AUDIT_WRITE": unix.CAP_AUDIT_WRITE, "AUDIT_CONTROL": unix.CAP_AUDIT_CONTROL, "SETFCAP": unix.CAP_SETFCAP,
	"MAC_OVERRIDE": unix.CAP_MAC_OVERRIDE, "MAC_ADMIN": unix.CAP_MAC_ADMIN, "SYSLOG": unix.CAP_SYSLOG, "WAKE_ALARM": unix.CAP_WAKE_ALARM,
	"BLOCK_SUSPEND": unix.CAP_BLOCK_SUSPEND, "AUDIT_READ": unix.CAP_AUDIT_READ, "PERFMON": unix.CAP_PERFMON, "BPF": unix.CAP_BPF,
	"CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE,
}

// credentials makes the process vcap (uid and gid 1000) with caps ambient:
// Go's fork keeps them across setuid and raises them into the inheritable
// and ambient sets, so the executable gets exactly these, as under BPM's
// runc.
func credentials(caps []string) (*syscall.SysProcAttr, error) {
	attr := asUser(VcapUID)
	for _, name := range caps {
		c, ok := Capabilities[strings.TrimPrefix(strings.ToUpper(name), "CAP_")]
		if !ok {
			return nil, fmt.Errorf("unknown capability %q", name)
		}
		attr.AmbientCaps = append(attr.AmbientCaps, c)
	}
	return attr, nil
}

// asUser makes a child run as uid, with the group of that number as
// vcap's.
func asUser(uid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{uint32(uid)}}}
}

// SetLimits applies BPM's limits to the launcher, whose process inherits
// them: open_files as RLIMIT_NOFILE, processes as RLIMIT_NPROC (BPM uses a
// pids cgroup; a pod's cgroup is the kubelet's), core_file_size as
// RLIMIT_CORE, each soft and hard. BPM's runc, root on the VM, may raise a
// hard limit; the container's root may not (no CAP_SYS_RESOURCE), so a
// limit above the container's hard limit is applied up to it, and a
// warning names the field, the limit asked and the one applied.
func SetLimits(l *bpm.Limits) (warnings []string, err error) {
	if l == nil {
		return nil, nil
	}
	set := func(name string, res int, v uint64) error {
		// syscall's Setrlimit, not x/sys's: only it stops Go restoring
		// the start-up RLIMIT_NOFILE in children.
		err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: v, Max: v})
		var cur syscall.Rlimit
		if err == nil || !errors.Is(err, syscall.EPERM) || syscall.Getrlimit(res, &cur) != nil || v <= cur.Max {
			if err != nil {
				return fmt.Errorf("limits.%s %d: setrlimit: %w", name, v, err)
			}
			return nil
		}
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: cur.Max, Max: cur.Max}); err != nil {
			return fmt.Errorf("limits.%s %d: setrlimit: %w", name, v, err)
		}
		warnings = append(warnings, fmt.Sprintf("limits.%s %d is above the container's hard limit, %d, which only CAP_SYS_RESOURCE may raise (BPM's runc does as root on the VM): the process runs with %d", name, v, cur.Max, cur.Max))
		return nil
	}
	if l.OpenFiles != nil {
		if err := set("open_files", unix.RLIMIT_NOFILE, *l.OpenFiles); err != nil {
			return warnings, err
		}
	}
	if l.Processes != nil && *l.Processes > 0 {
		if err := set("processes", unix.RLIMIT_NPROC, uint64(*l.Processes)); err != nil {
			return warnings, err
		}
	}
	if l.CoreFileSize != nil {
		if err := set("core_file_size", unix.RLIMIT_CORE, *l.CoreFileSize); err != nil {
			return warnings, err
		}
	}
	return warnings, nil
}

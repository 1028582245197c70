package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Where a container's processes listen, read from the host's /proc (this
// runs as root, as the node does): the release image needs no tools for it.

// listener is a TCP port processes listen on.
type listener struct {
	Port int
	// Loopback: bound to 127.0.0.1 or ::1, so reachable only from inside
	// the pod's network namespace.
	Loopback bool
}

// listeners are the TCP ports the processes of the node's container id
// listen on: its processes as containerd lists them, their sockets among
// those of the pod's network namespace.
func (s *Sandbox) listeners(ctx context.Context, id string) ([]listener, error) {
	out, err := s.w.Cluster.Ctr(ctx, "task", "ps", id)
	if err != nil {
		return nil, err
	}
	// PID INFO, then a line per process.
	var pids []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				pids = append(pids, f[0])
			}
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("container %s has no process", id)
	}
	sockets := map[string]bool{}
	for _, pid := range pids {
		fds, _ := os.ReadDir(filepath.Join("/proc", pid, "fd"))
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc", pid, "fd", fd.Name()))
			if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
				sockets[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	var found []listener
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%s/net/%s", pids[0], table))
		if err != nil {
			continue
		}
		for _, l := range listening(bufio.NewScanner(f)) {
			if sockets[l.inode] && !slices.Contains(found, l.listener) {
				found = append(found, l.listener)
			}
		}
		f.Close()
	}
	slices.SortFunc(found, func(a, b listener) int { return a.Port - b.Port })
	return found, nil
}

type socket struct {
	listener
	inode string
}

// listening reads the sockets in state LISTEN of a /proc/net/tcp or tcp6
// table: "sl local_address rem_address st ... inode", addresses in hex.
func listening(s *bufio.Scanner) []socket {
	var out []socket
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		addr, portHex, ok := strings.Cut(f[1], ":")
		port, err := strconv.ParseInt(portHex, 16, 32)
		if !ok || err != nil {
			continue
		}
		// 127.0.0.1 is 0100007F in the kernel's byte order; ::1 ends so.
		loopback := addr == "0100007F" || addr == "00000000000000000000000001000000"
		out = append(out, socket{listener{Port: int(port), Loopback: loopback}, f[9]})
	}
	return out
}

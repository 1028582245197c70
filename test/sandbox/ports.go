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

	"github.com/bosh-injector/bosh-injector/test/podman"
)

// Where a container's processes listen, read from the host's /proc (this
// runs as root, as podman does): the release image needs no tools for it.

// listener is a TCP port processes listen on.
type listener struct {
	Port int
	// Loopback: bound to 127.0.0.1 or ::1, so reachable only from inside
	// the pod's network namespace.
	Loopback bool
}

// address is how the host reaches a pod whose container has host pid pid:
// 127.0.0.1 under host networking, else the pod's own IPv4 address; "" for
// a pod without a network (loopback only).
func address(pid int) string {
	own, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	host, err2 := os.Readlink("/proc/self/ns/net")
	if err1 == nil && err2 == nil && own == host {
		return "127.0.0.1"
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/fib_trie", pid))
	if err != nil {
		return ""
	}
	return localAddress(string(data))
}

// localAddress is the first non-loopback local IPv4 address of a
// /proc/net/fib_trie: a "|-- <ip>" leaf followed by "/32 host LOCAL".
func localAddress(fibTrie string) string {
	var leaf string
	for line := range strings.Lines(fibTrie) {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "|--":
			leaf = f[1]
		case len(f) == 3 && f[0] == "/32" && f[1] == "host" && f[2] == "LOCAL":
			if leaf != "" && !strings.HasPrefix(leaf, "127.") {
				return leaf
			}
		}
	}
	return ""
}

// containerPid is the host pid of a podman container's first process.
func containerPid(ctx context.Context, container string) (int, error) {
	out, err := podman.Command(ctx, "inspect", "--format", "{{.State.Pid}}", container).Output()
	if err != nil {
		return 0, fmt.Errorf("podman inspect %s: %w", container, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

// listeners are the TCP ports the processes of a podman container listen
// on, whose first process has host pid pid.
func listeners(ctx context.Context, container string, pid int) ([]listener, error) {
	out, err := podman.Command(ctx, "top", container, "hpid").Output()
	if err != nil {
		return nil, fmt.Errorf("podman top %s: %w", container, err)
	}
	sockets := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		hpid := strings.TrimSpace(line)
		fds, _ := os.ReadDir(filepath.Join("/proc", hpid, "fd"))
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc", hpid, "fd", fd.Name()))
			if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
				sockets[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	var found []listener
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
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

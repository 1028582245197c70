package sandbox

import (
	"bufio"
	"slices"
	"strings"
	"testing"
)

// Sockets in LISTEN (0A) only, with their port and whether they are bound
// to loopback, from /proc/net/tcp and tcp6.
func TestListening(t *testing.T) {
	tables := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 41001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41002 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000  1000        0 41003 1 0000000000000000 20 4 30 10 -1
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41004 1 0000000000000000 100 0 0 10 0
`
	got := listening(bufio.NewScanner(strings.NewReader(tables)))
	want := []socket{
		{listener{Port: 8080}, "41001"},
		{listener{Port: 3306, Loopback: true}, "41002"},
		{listener{Port: 80, Loopback: true}, "41004"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("listening = %+v, want %+v", got, want)
	}
}

func TestPortLine(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ls   []listener
		want string
	}{
		{"10.88.0.7", []listener{{Port: 80}, {Port: 3306, Loopback: true}}, "web listens on 10.88.0.7:80, 3306 (on the pod's loopback only)"},
		{"127.0.0.1", []listener{{Port: 8080, Loopback: true}}, "web listens on 127.0.0.1:8080"},
		{"", []listener{{Port: 8080}}, "web listens on 8080 (the pod has no network: not reachable from the host)"},
		{"", nil, "web listens on no TCP port"},
	} {
		if got := portLine("web", tc.ls, tc.addr); got != tc.want {
			t.Errorf("portLine(%q, %v) = %q, want %q", tc.addr, tc.ls, got, tc.want)
		}
	}
}

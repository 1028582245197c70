package ssh

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// An exec's exit status is its error stream's last message, and the
// protocol counts no message as success: client-go's watchErrorStream and
// the API server's WebSocket-to-SPDY translator (which then sends Success
// on) both do. So an exec whose streams are cut between the API server,
// the kubelet's proxy and the runtime's streaming server (the container
// stopping under it, a connection closed early) looks as if the command
// succeeded with no output. `ssh -c` therefore runs the command in a child
// shell and writes its exit status last on stderr, as a marker line the
// client removes: a run without it was cut, and says so; `logs` checks
// that its tarball's gzip stream arrived whole.

// exitMarker starts the marker line; \x1e (record separator) is not
// text a command prints.
const exitMarker = "\x1ebosh-injector-exit "

// ErrCut is the exit status of an `ssh -c` whose command's own exit
// status never arrived, as ssh's for a lost connection.
const ErrCut = 255

// withExitStatus is the shell script that runs command in a child shell
// (its exec, exit and traps stay its own) and then writes the marker
// with its exit status to stderr.
func withExitStatus(command string) string {
	quoted := "'" + strings.ReplaceAll(command, "'", `'\''`) + "'"
	return fmt.Sprintf(`"${BASH:-/bin/sh}" -c %s; s=$?; printf '%s%%d\n' "$s" >&2; exit "$s"`, quoted, exitMarker)
}

// exitTrailer passes stderr through but the marker line, whose exit
// status it keeps.
type exitTrailer struct {
	w    io.Writer
	held []byte
	code int
	seen bool
}

// maxMarker bounds a held line that might be the marker.
const maxMarker = len(exitMarker) + 8

func (t *exitTrailer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(t.held) == 0 {
			i := bytes.IndexByte(p, exitMarker[0])
			if i < 0 {
				_, err := t.w.Write(p)
				return n, err
			}
			if _, err := t.w.Write(p[:i]); err != nil {
				return n, err
			}
			p = p[i:]
		}
		// A line from a \x1e on is held until its end: a marker, or text
		// to pass on (up to another \x1e, which may start the marker).
		start := 0
		if len(t.held) == 0 {
			start = 1
		}
		if i := bytes.IndexByte(p[start:], exitMarker[0]); i >= 0 && !bytes.Contains(p[:start+i], []byte{'\n'}) {
			t.held = append(t.held, p[:start+i]...)
			p = p[start+i:]
			if err := t.flush(); err != nil {
				return n, err
			}
			continue
		}
		end := bytes.IndexByte(p, '\n')
		if end < 0 {
			t.held = append(t.held, p...)
			if len(t.held) > maxMarker {
				return n, t.flush()
			}
			return n, nil
		}
		t.held = append(t.held, p[:end+1]...)
		p = p[end+1:]
		if rest, ok := strings.CutPrefix(string(t.held), exitMarker); ok {
			if code, err := strconv.Atoi(strings.TrimSuffix(rest, "\n")); err == nil {
				t.code, t.seen, t.held = code, true, nil
				continue
			}
		}
		if err := t.flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// flush writes what was held: it was no marker.
func (t *exitTrailer) flush() error {
	_, err := t.w.Write(t.held)
	t.held = nil
	return err
}

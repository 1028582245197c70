package ssh

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestExitStatusScript runs the script `ssh -c` sends with this machine's
// shells: the command's output and exit status, its exec, exit and traps
// its own, the marker last on stderr and removed by the trailer however
// the stream is split.
func TestExitStatusScript(t *testing.T) {
	for _, shell := range []string{"/bin/sh", "/bin/bash"} {
		for _, tc := range []struct {
			command, stdout, stderr string
			code                    int
		}{
			{command: "echo hello", stdout: "hello\n"},
			{command: `echo 'it'"'"'s'; echo err >&2; exit 3`, stdout: "it's\n", stderr: "err\n", code: 3},
			{command: "trap 'echo bye' EXIT; exec echo replaced", stdout: "replaced\n"},
			{command: `printf 'no newline \036 at end' >&2`, stderr: "no newline \x1e at end"},
		} {
			cmd := exec.Command(shell, "-c", withExitStatus(tc.command))
			var stdout, raw bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &raw
			err := cmd.Run()
			code := 0
			if exit, ok := err.(*exec.ExitError); ok {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tc.stdout || code != tc.code {
				t.Errorf("%s -c %q: stdout %q, exit %d; want %q, %d", shell, tc.command, stdout.String(), code, tc.stdout, tc.code)
			}
			// Split into every pair of writes, as the exec's frames may.
			for cut := 0; cut <= raw.Len(); cut++ {
				var stderr bytes.Buffer
				tr := &exitTrailer{w: &stderr}
				_, _ = tr.Write(raw.Bytes()[:cut])
				_, _ = tr.Write(raw.Bytes()[cut:])
				_ = tr.flush()
				if stderr.String() != tc.stderr || !tr.seen || tr.code != tc.code {
					t.Fatalf("%s -c %q split at %d: stderr %q, marker %v %d; want %q, %d", shell, tc.command, cut, stderr.String(), tr.seen, tr.code, tc.stderr, tc.code)
				}
			}
		}
	}
}

// TestExitTrailerCut is a run whose marker never came: the trailer says
// so and loses none of the output.
func TestExitTrailerCut(t *testing.T) {
	var stderr bytes.Buffer
	tr := &exitTrailer{w: &stderr}
	_, _ = tr.Write([]byte("partial\n" + exitMarker[:5]))
	_ = tr.flush()
	if tr.seen || stderr.String() != "partial\n"+exitMarker[:5] {
		t.Errorf("seen %v, stderr %q", tr.seen, stderr.String())
	}
	if !strings.HasPrefix(withExitStatus("x"), `"${BASH:-/bin/sh}" -c 'x';`) {
		t.Errorf("script %q", withExitStatus("x"))
	}
}

package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/inject/runtime"
)

// TestPreStart runs the jobs' pre-start scripts as the agent does: at once
// (each of a and b waits for the other's mark, which run one after the
// other they would never see), each with its job's environment, output in
// the job's log files and, prefixed with the job, on the container's; a
// job without the script is skipped, and a failure names the failed and the
// successful jobs with the failed one's last output lines.
func TestPreStart(t *testing.T) {
	vcap := t.TempDir()
	waitForOther := `touch MARKS/$1; i=0; while [ ! -f MARKS/$2 ]; do i=$((i+1)); [ $i -gt 200 ] && { echo never saw $2; exit 1; }; sleep 0.05; done
echo home=$HOME; echo to stderr >&2; printf 'no newline'
`
	scripts := map[string]string{
		"a":    strings.NewReplacer("$1", "a", "$2", "b").Replace(waitForOther),
		"b":    strings.NewReplacer("$1", "b", "$2", "a").Replace(waitForOther),
		"fail": "for i in $(seq 1 15); do echo line $i; done\nexit 3\n",
	}
	for job, body := range scripts {
		write(t, filepath.Join(vcap, "jobs", job, "bin", "pre-start"), "#!/bin/sh\n"+strings.ReplaceAll(body, "MARKS", vcap)+"\n", 0o755)
	}
	if err := os.MkdirAll(filepath.Join(vcap, "jobs", "none", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	s := runtime.Scripts{VCAP: vcap, Out: &out, Err: &out}
	if err := s.PreStart(context.Background(), []string{"a", "none", "b"}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"a: home=/var/vcap/data/a\n", "b: home=/var/vcap/data/b\n", "a: to stderr\n", "b: no newline\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if log, _ := os.ReadFile(filepath.Join(vcap, "sys", "log", "a", "pre-start.stdout.log")); !strings.HasPrefix(string(log), "home=/var/vcap/data/a\n") {
		t.Errorf("a's pre-start.stdout.log: %q", log)
	}
	if log, _ := os.ReadFile(filepath.Join(vcap, "sys", "log", "b", "pre-start.stderr.log")); string(log) != "to stderr\n" {
		t.Errorf("b's pre-start.stderr.log: %q", log)
	}

	for _, m := range []string{"a", "b"} {
		_ = os.Remove(filepath.Join(vcap, m))
	}
	err := s.PreStart(context.Background(), []string{"a", "fail", "b"})
	if err == nil {
		t.Fatal("a failing pre-start did not fail")
	}
	msg := err.Error()
	for _, want := range []string{"1 of 3 pre-start scripts failed. Failed Jobs: fail. Successful Jobs: a, b.", "pre-start of job 'fail' failed: exit status 3", "line 6\nline 7", "line 15"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 5\n") {
		t.Errorf("error carries more than the last lines:\n%s", msg)
	}
}

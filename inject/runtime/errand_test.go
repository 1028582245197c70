package runtime_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/inject/runtime"
)

// TestErrand runs a job's bin/run as the agent's run_errand does: the
// agent's PATH over the caller's environment, no arguments, output on the
// caller's, the exit status returned; a missing bin/run is an error.
func TestErrand(t *testing.T) {
	vcap := t.TempDir()
	write(t, filepath.Join(vcap, "jobs", "check", "bin", "run"), "#!/bin/sh\necho PATH=$PATH args=$# kept=$ERRAND_TEST_KEPT\necho to stderr >&2\nexit 3\n", 0o755)
	t.Setenv("ERRAND_TEST_KEPT", "yes")
	var out syncBuffer
	s := runtime.Scripts{VCAP: vcap, Out: &out, Err: &out}
	code, err := s.Errand(context.Background(), "check")
	if err != nil || code != 3 {
		t.Fatalf("exit %d, %v, want 3", code, err)
	}
	if want := "PATH=/usr/sbin:/usr/bin:/sbin:/bin args=0 kept=yes\nto stderr\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if code, err := s.Errand(context.Background(), "storefront"); err == nil || code == 0 || !strings.Contains(err.Error(), "errand storefront") {
		t.Errorf("without bin/run: exit %d, %v", code, err)
	}
}

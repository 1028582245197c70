package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderFailureGoesToTheTerminationLog(t *testing.T) {
	termLog := filepath.Join(t.TempDir(), "termination-log")
	t.Setenv("BOSH_INJECTOR_INSTANCE_INDEX", "0")
	t.Setenv("POD_NAMESPACE", "ns")
	t.Setenv("BOSH_INJECTOR_TERMINATION_LOG", termLog)
	var out, errOut bytes.Buffer
	code := Main([]string{"render", "--resolved", filepath.Join(t.TempDir(), "missing.json")}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (stderr %s)", code, errOut.String())
	}
	msg, err := os.ReadFile(termLog)
	if err != nil || !strings.HasPrefix(string(msg), "reading the resolved properties:") || out.String() != string(msg) {
		t.Fatalf("termination log %q (%v), stdout %q", msg, err, out.String())
	}
}

func TestGatherNeedsItsInputs(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"gather"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "--manifest-secret are required") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

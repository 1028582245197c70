package app

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
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

// render installs the process containers' shared plan next to the
// launcher, where their launchers, hooks and probes load it.
func TestInstallLauncherWritesThePlan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	instance := contract.Instance{Containers: []string{"web-server"}, DrainSeconds: 30}
	if err := installLauncher(dir, instance.Encode()); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(dir, "bosh-injector")); err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("launcher: %v %v", info, err)
	}
	t.Setenv(contract.EnvPlan, contract.Plan{Job: "web", Process: "server", Container: "web-server"}.Encode())
	p, err := contract.Load(dir)
	if err != nil || !slices.Equal(p.Containers, instance.Containers) || p.DrainSeconds != 30 {
		t.Fatalf("loaded %+v, %v", p, err)
	}

	var out, errOut bytes.Buffer
	t.Setenv("BOSH_INJECTOR_INSTANCE_INDEX", "0")
	t.Setenv("POD_NAMESPACE", "ns")
	t.Setenv(contract.EnvInstance, instance.Encode())
	code := Main([]string{"render", "--termination-log", filepath.Join(t.TempDir(), "log")}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "give --install-launcher too") {
		t.Fatalf("render with a plan but nowhere to write it: exit %d: %s %s", code, out.String(), errOut.String())
	}
}

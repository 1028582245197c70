package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

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

// render installs the launcher, for the process containers, where the
// release jobs are copied.
func TestInstallLauncher(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	if err := installLauncher(dir); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(dir, "bosh-injector")); err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("launcher: %v %v", info, err)
	}
}

// The pre-start step waits for render, runs the scripts, and marks its end
// only when they all passed; the failure goes to the termination log.
func TestPreStartStep(t *testing.T) {
	vcap, plan := t.TempDir(), t.TempDir()
	script := filepath.Join(vcap, "jobs", "web", "bin", contract.PreStart)
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho preparing\nexit ${FAIL:-0}\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := contract.MarkDone(plan, contract.Rendered); err != nil {
		t.Fatal(err)
	}
	termLog := filepath.Join(t.TempDir(), "termination-log")
	args := []string{contract.PreStart, "--vcap", vcap, "--plan-dir", plan, "--step", "pre-start-web", "--termination-log", termLog, "web"}
	t.Setenv("FAIL", "3")
	var out, errOut bytes.Buffer
	if code := Main(args, &out, &errOut); code != 1 || contract.Done(plan, "pre-start-web") {
		t.Fatalf("failing pre-start: exit %d, marked %v: %s %s", code, contract.Done(plan, "pre-start-web"), out.String(), errOut.String())
	}
	if msg, _ := os.ReadFile(termLog); !strings.Contains(string(msg), "Failed Jobs: web") || !strings.Contains(string(msg), "preparing") {
		t.Errorf("termination log: %s", msg)
	}
	t.Setenv("FAIL", "0")
	out.Reset()
	if code := Main(args, &out, &errOut); code != 0 || !contract.Done(plan, "pre-start-web") || !strings.Contains(out.String(), "web: preparing") {
		t.Fatalf("pre-start: exit %d, marked %v: %s %s", code, contract.Done(plan, "pre-start-web"), out.String(), errOut.String())
	}
}

// A held setup step runs its work once per sandbox: restarted in the same
// one, its container finds the step done and only waits to be stopped.
func TestHeldStepRunsOncePerSandbox(t *testing.T) {
	plan := t.TempDir()
	step := setupStep{planDir: plan, name: "pre-start", hold: true}
	ran := 0
	work := func(context.Context) error {
		ran++
		return contract.MarkDone(plan, "pre-start")
	}
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := &cobra.Command{}
		cmd.SetContext(ctx)
		done := make(chan error, 1)
		go func() { done <- step.run(cmd, work) }()
		select {
		case err := <-done:
			t.Fatalf("a held step ended before it was stopped: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if ran != 1 {
		t.Errorf("the step's work ran %d times, want once", ran)
	}
}

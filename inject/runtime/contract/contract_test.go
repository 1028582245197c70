package contract_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// A process container's plan is its own part, from EnvPlan, and the
// instance's, which render wrote once in the plan directory.
func TestLoadJoinsEnvAndInstanceFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	in := contract.Instance{Containers: []string{"web-server", `odd,"containers":[]`},
		Jobs: []contract.Job{{Name: "web", Scripts: []string{contract.PostStart}, Host: "web-server"}}, PersistentDiskMB: 1024, DrainSeconds: 120}
	if err := contract.WriteInstance(dir, in.Encode()); err != nil {
		t.Fatal(err)
	}
	own := contract.Plan{Job: "web", Process: "server", Monit: true, Container: "web-server", Instance: contract.Instance{Containers: []string{"ignored"}}}
	if strings.Contains(own.Encode(), "ignored") {
		t.Fatalf("the env plan carries the instance's part: %s", own.Encode())
	}
	t.Setenv(contract.EnvPlan, own.Encode())
	got, err := contract.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := own
	want.Instance = in
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load gave %+v, want %+v", got, want)
	}
}

// Bad or missing input fails with what is wrong and where.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if err := contract.WriteInstance(dir, "{not json"); err == nil || !strings.Contains(err.Error(), contract.EnvInstance) {
		t.Errorf("WriteInstance of bad JSON: %v, want an error naming %s", err, contract.EnvInstance)
	}
	t.Setenv(contract.EnvPlan, "")
	if _, err := contract.Load(dir); err == nil || !strings.Contains(err.Error(), contract.EnvPlan+" is not set") {
		t.Errorf("Load without %s: %v", contract.EnvPlan, err)
	}
	t.Setenv(contract.EnvPlan, contract.Plan{Job: "web"}.Encode())
	if _, err := contract.Load(dir); err == nil || !strings.Contains(err.Error(), "render container") {
		t.Errorf("Load without %s: %v", contract.InstanceFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, contract.InstanceFile), []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := contract.Load(dir); err == nil || !strings.Contains(err.Error(), contract.InstanceFile) {
		t.Errorf("Load of a bad %s: %v", contract.InstanceFile, err)
	}
}

// The setup's steps mark their end for the pod's sandbox: a waiter sees
// render, then the pre-start steps the rendered instance names, and a mark
// of another sandbox (a recreated pod sandbox) is not the end.
func TestSetupSteps(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := contract.WaitSetup(ctx, dir); err == nil || !strings.Contains(err.Error(), "waiting for the render step") {
		t.Fatalf("WaitSetup before render: %v", err)
	}
	if err := contract.WriteInstance(dir, contract.Instance{Containers: []string{"web-server"}, PreStarts: []string{"pre-start"}}.Encode()); err != nil {
		t.Fatal(err)
	}
	if err := contract.MarkDone(dir, contract.Rendered); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := contract.WaitSetup(ctx, dir); err == nil || !strings.Contains(err.Error(), "waiting for the pre-start step") {
		t.Fatalf("WaitSetup before pre-start: %v", err)
	}
	// An earlier sandbox's mark.
	if err := os.WriteFile(filepath.Join(dir, "pre-start.done"), []byte("net:[1] ipc:[2]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if contract.Done(dir, "pre-start") {
		t.Fatal("a mark of another sandbox counts")
	}
	done := make(chan error, 1)
	go func() { done <- contract.WaitSetup(context.Background(), dir) }()
	time.Sleep(50 * time.Millisecond)
	if err := contract.MarkDone(dir, "pre-start"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitSetup did not see pre-start end")
	}
}

// The launchers find the address render left, and none where render
// waited for it itself.
func TestAddress(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := contract.ReadAddress(dir); ok || err != nil {
		t.Fatalf("no file: got %v, %v", ok, err)
	}
	want := contract.Address{Name: "0.nats.default.cf.bosh", IP: "10.1.0.7"}
	if err := contract.WriteAddress(dir, want); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := contract.ReadAddress(dir); !ok || err != nil || got != want {
		t.Errorf("got %+v, %v, %v; want %+v", got, ok, err, want)
	}
}

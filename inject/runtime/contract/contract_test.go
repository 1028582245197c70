package contract_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// A process container's plan is its own part, from EnvPlan, and the
// instance's, which render wrote once next to the launcher.
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
	if _, err := contract.Load(dir); err == nil || !strings.Contains(err.Error(), "render init container") {
		t.Errorf("Load without %s: %v", contract.InstanceFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, contract.InstanceFile), []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := contract.Load(dir); err == nil || !strings.Contains(err.Error(), contract.InstanceFile) {
		t.Errorf("Load of a bad %s: %v", contract.InstanceFile, err)
	}
}

// A pod injected before the plan was split has it whole in EnvPlan and no
// file: a newer launcher still runs it.
func TestLoadReadsAWholePlanFromEnv(t *testing.T) {
	t.Setenv(contract.EnvPlan, `{"job":"web","process":"server","container":"web-server","containers":["web-server","web-other"],"jobs":[{"name":"web","scripts":["drain"],"host":"web-server"}],"drain_seconds":120}`)
	got, err := contract.Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := contract.Plan{Job: "web", Process: "server", Container: "web-server", Instance: contract.Instance{Containers: []string{"web-server", "web-other"},
		Jobs: []contract.Job{{Name: "web", Scripts: []string{contract.Drain}, Host: "web-server"}}, DrainSeconds: 120}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load gave %+v, want %+v", got, want)
	}
}

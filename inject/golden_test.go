package inject_test

import (
	"errors"
	"flag"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

var update = flag.Bool("update", false, "rewrite the golden files")

type goldenCase struct {
	Info bpm.Info   `json:"info"`
	Pod  corev1.Pod `json:"pod"`
	// ReleaseJobs overrides the settings' (copy).
	ReleaseJobs inject.ReleaseJobs `json:"releaseJobs,omitempty"`
	// Held: the deploy has not started the instance yet.
	Held bool `json:"held,omitempty"`
}

// settings are the case's settings.
func (c goldenCase) settings() inject.Settings {
	s := settings
	if c.ReleaseJobs != "" {
		s.ReleaseJobs = c.ReleaseJobs
	}
	return s
}

var settings = inject.Settings{OperatorImage: "localhost/bosh-injector:dev", DNS: inject.DNS{Server: "10.96.0.53", ClusterDomain: "cluster.local"}}

// injectCase runs a case as the webhook does: identity, then mutation. It
// returns the mutated pod as YAML, or the denial.
func injectCase(t *testing.T, c goldenCase) (*corev1.Pod, string) {
	t.Helper()
	pod := c.Pod.DeepCopy()
	inst, err := inject.InstanceOf(pod, &c.Info)
	if err == nil {
		err = inject.Mutate(pod, inject.Plan{Info: &c.Info, Instance: inst, Settings: c.settings(), Namespace: c.Pod.Namespace, Held: c.Held})
	}
	var denial *inject.Denial
	if errors.As(err, &denial) {
		return nil, "denied: " + denial.Error() + "\n"
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return pod, string(out)
}

func TestGolden(t *testing.T) {
	inputs := map[string]bool{}
	for _, file := range caseFiles() {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		inputs[name] = true
		t.Run(name, func(t *testing.T) {
			c := readCase(t, file)
			pod, got := injectCase(t, c)
			golden := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v: run go test ./inject -update", err)
			}
			if got != string(want) {
				t.Errorf("mutated pod differs from %s (run go test ./inject -update and review the diff):\n%s", golden, got)
			}
			if pod == nil {
				return
			}
			t.Run("idempotent", func(t *testing.T) {
				again := pod.DeepCopy()
				inst, err := inject.InstanceOf(again, &c.Info)
				if err != nil {
					t.Fatal(err)
				}
				if err := inject.Mutate(again, inject.Plan{Info: &c.Info, Instance: inst, Settings: c.settings(), Namespace: c.Pod.Namespace, Held: c.Held}); err != nil {
					t.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(again, pod) {
					a, _ := yaml.Marshal(again)
					t.Errorf("injecting twice differs from once:\n%s", a)
				}
				stripped := pod.DeepCopy()
				if err := inject.Strip(stripped); err != nil {
					t.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(stripped, &c.Pod) {
					s, _ := yaml.Marshal(stripped)
					t.Errorf("stripping does not restore the user's pod:\n%s", s)
				}
			})
		})
	}
	goldens, _ := filepath.Glob("testdata/*.golden.yaml")
	for _, g := range goldens {
		if !inputs[strings.TrimSuffix(filepath.Base(g), ".golden.yaml")] {
			t.Errorf("%s has no input case: remove it", g)
		}
	}
}

// caseFiles are the golden cases' inputs in testdata.
func caseFiles() []string {
	files, _ := filepath.Glob("testdata/*.yaml")
	return slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, ".golden.yaml") })
}

// readCase reads a golden case's input.
func readCase(t *testing.T, file string) goldenCase {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c goldenCase
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestImageVolumeHoldsTheReleaseJobs: render mounts from a release image
// the directory release images hold their jobs in.
func TestImageVolumeHoldsTheReleaseJobs(t *testing.T) {
	pod, _ := injectCase(t, readCase(t, "testdata/image-volumes.yaml"))
	render := pod.Spec.Containers[slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == "render" })]
	for _, m := range render.VolumeMounts {
		if strings.HasPrefix(m.Name, "bosh-release-") && "/"+m.SubPath != releaseimage.JobsDir {
			t.Errorf("render mounts %s of the release image, which holds its jobs in %s", m.SubPath, releaseimage.JobsDir)
		}
	}
}

// The launcher mounted from the operator image's volume is where the
// Dockerfile puts the binary, under the name the containers run.
func TestOperatorImageHoldsTheLauncher(t *testing.T) {
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	want := "/" + contract.OperatorBinSubPath + "/" + path.Base(contract.Binary)
	if !regexp.MustCompile(`(?m)^COPY --from=build \S+ ` + regexp.QuoteMeta(want) + `$`).Match(dockerfile) {
		t.Errorf("the Dockerfile does not install the binary as %s", want)
	}
}

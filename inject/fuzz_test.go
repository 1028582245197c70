package inject_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/inject"
)

// FuzzMutate feeds random pods and BPM info through what the webhook does
// with them: it must never panic, and an injected pod injects to itself.
func FuzzMutate(f *testing.F) {
	cases, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range cases {
		if strings.HasSuffix(file, ".golden.yaml") {
			continue
		}
		data, _ := os.ReadFile(file)
		var c goldenCase
		if yaml.Unmarshal(data, &c) != nil {
			continue
		}
		pod, _ := json.Marshal(c.Pod)
		info, _ := json.Marshal(c.Info)
		f.Add(pod, info)
	}
	f.Fuzz(func(t *testing.T, podJSON, infoJSON []byte) {
		var pod corev1.Pod
		var info bpm.Info
		if json.Unmarshal(podJSON, &pod) != nil || json.Unmarshal(infoJSON, &info) != nil {
			return
		}
		inst, err := inject.InstanceOf(&pod, &info)
		if err != nil {
			return
		}
		plan := inject.Plan{Info: &info, Instance: inst, Settings: settings, Namespace: "fuzz"}
		// Denials and other errors end the case: only injected pods go on.
		if err := inject.Mutate(&pod, plan); err != nil {
			return
		}
		again := pod.DeepCopy()
		if err := inject.Mutate(again, plan); err != nil {
			t.Fatalf("second injection failed: %v", err)
		}
		if !equality.Semantic.DeepEqual(again, &pod) {
			t.Fatal("injecting twice differs from once")
		}
	})
}

package inject_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Every container the injection adds, in every golden case, is hardened:
// no privilege escalation, RuntimeDefault seccomp, all capabilities
// dropped and only the launcher's and BPM's added, unless BPM says
// privileged.
func TestInjectedContainersAreHardened(t *testing.T) {
	checked := 0
	for _, file := range caseFiles() {
		c := readCase(t, file)
		pod, _ := injectCase(t, c)
		if pod == nil {
			continue
		}
		var rec struct{ InitContainers, Containers []string }
		if err := json.Unmarshal([]byte(pod.Annotations[names.AnnotationInjected]), &rec); err != nil {
			t.Fatal(err)
		}
		privileged := privilegedProcesses(&c.Info)
		for _, ctr := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			if !slices.Contains(rec.InitContainers, ctr.Name) && !slices.Contains(rec.Containers, ctr.Name) {
				continue
			}
			checked++
			sc := ctr.SecurityContext
			where := file + ": container " + ctr.Name
			if privileged[ctr.Name] {
				if sc == nil || !ptr.Deref(sc.Privileged, false) {
					t.Errorf("%s: BPM says privileged, the container is not", where)
				}
				continue
			}
			switch {
			case sc == nil:
				t.Errorf("%s: no security context", where)
			case ptr.Deref(sc.Privileged, false):
				t.Errorf("%s: privileged, BPM did not say so", where)
			case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Errorf("%s: seccomp profile %v, want RuntimeDefault", where, sc.SeccompProfile)
			case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
				t.Errorf("%s: capabilities %v do not drop ALL", where, sc.Capabilities)
			case !ptr.Deref(sc.AllowPrivilegeEscalation, true) == slices.Contains(sc.Capabilities.Add, "SYS_ADMIN"):
				t.Errorf("%s: allowPrivilegeEscalation %v with capabilities %v", where, sc.AllowPrivilegeEscalation, sc.Capabilities.Add)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d injected containers checked", checked)
	}
}

// What the root launcher, its hooks and probes run and read (the launcher
// and the instance's plan) is writable by render alone: a job's process
// cannot change it.
func TestOnlyRenderWritesTheLauncher(t *testing.T) {
	checked := 0
	for _, file := range caseFiles() {
		pod, _ := injectCase(t, readCase(t, file))
		if pod == nil {
			continue
		}
		for _, ctr := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			for _, m := range ctr.VolumeMounts {
				if m.Name == contract.BinVolume && !m.ReadOnly && ctr.Name != "render" {
					t.Errorf("%s: container %s mounts %s writable", file, ctr.Name, m.Name)
				}
				if m.Name == contract.BinVolume {
					checked++
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d mounts of %s checked", checked, contract.BinVolume)
	}
}

// privilegedProcesses are the container names of BPM processes with
// unsafe.privileged.
func privilegedProcesses(info *bpm.Info) map[string]bool {
	out := map[string]bool{}
	for _, b := range info.BPM {
		for job, cfg := range b.Jobs {
			for _, p := range cfg.Processes {
				if p.Unsafe != nil && p.Unsafe.Privileged {
					out[names.DNS1123LabelMax(job+"-"+p.Name, 63)] = true
				}
			}
		}
	}
	return out
}

// A release name from the manifest reaches the copy container's shell as
// an argument, never as script text.
func TestCopyContainerQuotesTheReleaseName(t *testing.T) {
	evil := `x"; touch /tmp/pwned; echo "$(id)`
	c := inject.CopyContainer(evil, "img", "vol")
	if len(c.Command) != 5 || c.Command[0] != "/bin/sh" || c.Command[1] != "-c" {
		t.Fatalf("command %q", c.Command)
	}
	if strings.Contains(c.Command[2], "touch") || strings.Contains(c.Command[2], "jobs-src/x") {
		t.Errorf("the release name is in the script: %q", c.Command[2])
	}
	if c.Command[4] != "/var/vcap/all-releases/jobs-src/"+evil {
		t.Errorf("destination argument %q", c.Command[4])
	}
}

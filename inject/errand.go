package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// errandGroup says whether the instance is an errand group's (lifecycle:
// errand), whose pod runs its jobs to completion; a service group's runs
// an errand job's bin/run only on demand.
func errandGroup(info *bpm.Info) bool { return info.Lifecycle == "errand" }

// ErrandContainer names the container holding a colocated errand job.
func ErrandContainer(job string) string {
	return names.DNS1123LabelMax(job+"-errand", 63)
}

// errandContainers hold the colocated errand jobs of a service group's
// instance, one per idle job with bin/run, so run-errand can exec bin/run
// where it finds the job as the agent does on the VM: in the job's release
// image (its packages), with the job's directories, as root. The container
// only waits (the launcher's sleep), and reaps what the runs leave behind.
func errandContainers(info *bpm.Info, instance bpm.InstanceBPM, images map[string]string, settings Settings) []corev1.Container {
	var out []corev1.Container
	for _, j := range info.Jobs {
		if !bpm.Idle(info.Lifecycle, instance, j.Name) || !slices.Contains(j.Scripts, contract.Run) {
			continue
		}
		c := jobContainer(ErrandContainer(j.Name), images[j.Release], j)
		c.Command = launcher(contract.Sleep)
		c.VolumeMounts = append(c.VolumeMounts, binMount(settings))
		c.SecurityContext = asUser(Hardened(rootCaps), 0)
		out = append(out, c)
	}
	return out
}

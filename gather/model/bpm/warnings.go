package bpm

import (
	"fmt"
	"slices"
	"strings"
)

// BPM settings a pod honours only in part: the gathering reports them per
// instance group and the webhook in its admission response, the pod is
// admitted with the warning.
const (
	WarnExecutableMount = "allow_executions is false, but Kubernetes volume mounts cannot be noexec: files there are executable"
	WarnSharedMount     = "shared (mount propagation to the host) is not applied: the mount stays private to the pod"
	// WarnHookCapabilities: BPM runs the hook as root on the VM with all of
	// root's capabilities; a pod gives it those a container runtime gives
	// root by default.
	WarnHookCapabilities = "hooks.pre_start runs as root with the capabilities a container runtime gives root by default (SETFCAP and NET_BIND_SERVICE among them), not all of root's as on a VM"
	// WarnEphemeralStore: on a VM without a persistent disk BPM makes the
	// store on the VM's own disk; a pod's is its own ephemeral storage.
	WarnEphemeralStore = "the instance group has no persistent disk: /var/vcap/store is the pod's own ephemeral storage (an emptyDir), so its data lives only as long as the pod (on a VM without a disk, as long as the VM); give the group a persistent_disk to keep it"
)

// Warnings are the BPM settings of instance index a pod honours only in
// part, one per job, process and field.
func (i *Info) Warnings(index int) []string {
	var out []string
	configs := i.ForIndex(index)
	for _, j := range i.Jobs {
		for _, p := range configs[j.Name].Processes {
			if p.Hooks != nil && p.Hooks.PreStart != "" && !p.Privileged() {
				out = append(out, fmt.Sprintf("job '%s', process '%s': %s", j.Name, p.Name, WarnHookCapabilities))
			}
			if p.Limits != nil && p.Limits.OpenFiles != nil {
				out = append(out, fmt.Sprintf("job '%s', process '%s': %s", j.Name, p.Name, WarnOpenFiles))
			}
			vols := slices.Clone(p.AdditionalVolumes)
			if p.Unsafe != nil {
				vols = append(vols, p.Unsafe.UnrestrictedVolumes...)
			}
			for _, v := range vols {
				if !v.AllowExecutions {
					out = append(out, fmt.Sprintf("job '%s', process '%s', volume %s: %s", j.Name, p.Name, v.Path, WarnExecutableMount))
				}
				if v.Shared {
					out = append(out, fmt.Sprintf("job '%s', process '%s', volume %s: %s", j.Name, p.Name, v.Path, WarnSharedMount))
				}
			}
		}
	}
	if store := i.storeJobs(configs); len(store) > 0 && i.EphemeralStore {
		what := "job '%s' stores"
		if len(store) > 1 {
			what = "jobs '%s' store"
		}
		out = append(out, fmt.Sprintf(what+" data in /var/vcap/store: %s", strings.Join(store, "', '"), WarnEphemeralStore))
	}
	return out
}

// StoresData says whether a job of any instance mounts /var/vcap/store.
func (i *Info) StoresData() bool {
	return slices.ContainsFunc(i.BPM, func(ib InstanceBPM) bool { return len(i.storeJobs(ib.Jobs)) > 0 })
}

// storeJobs are the jobs whose processes mount /var/vcap/store: their
// persistent_disk, or an additional volume there.
func (i *Info) storeJobs(configs map[string]Config) []string {
	var out []string
	for _, j := range i.Jobs {
		if slices.ContainsFunc(configs[j.Name].Processes, func(p Process) bool {
			return p.PersistentDisk || slices.ContainsFunc(p.AdditionalVolumes, func(v Volume) bool {
				return v.Path == storeDir || strings.HasPrefix(v.Path, storeDir+"/")
			})
		}) {
			out = append(out, j.Name)
		}
	}
	return out
}

// storeDir is where the persistent disk is mounted.
const storeDir = "/var/vcap/store"

package bpm

import (
	"fmt"
	"slices"
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
)

// Warnings are the BPM settings of instance index a pod honours only in
// part, one per job, process and field.
func (i *Info) Warnings(index int) []string {
	var out []string
	configs := i.ForIndex(index)
	for _, j := range i.Jobs {
		for _, p := range configs[j.Name].Processes {
			if p.Hooks != nil && p.Hooks.PreStart != "" && (p.Unsafe == nil || !p.Unsafe.Privileged) {
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
	return out
}

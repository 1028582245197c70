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
)

// Warnings are the BPM settings of instance index a pod honours only in
// part, one per job, process and field.
func (i *Info) Warnings(index int) []string {
	var out []string
	configs := i.ForIndex(index)
	for _, j := range i.Jobs {
		for _, p := range configs[j.Name].Processes {
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

package inject

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Labels and annotations Kubernetes sets on workload pods.
const (
	labelPodIndex        = "apps.kubernetes.io/pod-index"
	annotationCompletion = "batch.kubernetes.io/job-completion-index"
)

// InstanceOf computes the pod's instance: its ordinal (StatefulSet pod index
// or name suffix, an indexed Job's completion index, else 0) and its
// az-index label give index = ordinal × AZ count + (az-index − 1), so scaling
// never renumbers existing instances.
func InstanceOf(pod *corev1.Pod, info *bpm.Info) (Instance, error) {
	azCount := max(len(info.AZs), 1)
	azIndex := 1
	if v, ok := pod.Labels[names.LabelAZIndex]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > azCount {
			return Instance{}, deny(ReasonBadAZIndex, "label %s is %q; instance group '%s' has %d AZs %v, so it must be 1 to %d",
				names.LabelAZIndex, v, info.InstanceGroup, len(info.AZs), info.AZs, azCount)
		}
		azIndex = n
	}
	index := instance.Index(ordinal(pod), azIndex, azCount)
	if index >= info.Instances {
		return Instance{}, deny(ReasonIndexBeyond, "pod would be instance %d of instance group '%s', which has %d instances in the manifest: raise `instances` or lower the replicas",
			index, info.InstanceGroup, info.Instances)
	}
	inst := Instance{Index: index, Bootstrap: index == 0}
	if len(info.AZs) > 0 {
		inst.AZ = info.AZs[azIndex-1]
	}
	return inst, nil
}

func ordinal(pod *corev1.Pod) int {
	if n, err := strconv.Atoi(pod.Labels[labelPodIndex]); err == nil {
		return n
	}
	if n, err := strconv.Atoi(pod.Annotations[annotationCompletion]); err == nil {
		return n
	}
	if pod.Name != "" && pod.GenerateName == "" {
		if n, ok := names.Ordinal(pod.Name); ok {
			return n
		}
	}
	return 0
}

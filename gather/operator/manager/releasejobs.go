package manager

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bosh-injector/bosh-injector/inject"
)

// ReleaseJobsAuto picks image volumes when the cluster has them, else
// copies (Options.ReleaseJobs).
const ReleaseJobsAuto = "auto"

// Image volumes are GA (always on) from Kubernetes 1.36; containerd mounts
// them from 2.1, CRI-O from 1.31.
var (
	imageVolumeKube = version.MustParseGeneric("1.36")
	imageVolumeCRI  = map[string]*version.Version{"containerd": version.MustParseGeneric("2.1"), "cri-o": version.MustParseGeneric("1.31")}
)

// detectReleaseJobs is ReleaseJobsImage when the API server and every
// node's kubelet are 1.36 or later and every node's runtime mounts image
// volumes, else ReleaseJobsCopy; why is the reason, for the log.
func detectReleaseJobs(ctx context.Context, cfg *rest.Config) (mode inject.ReleaseJobs, why string) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return inject.ReleaseJobsCopy, err.Error()
	}
	info, err := cs.Discovery().ServerVersion()
	if err != nil {
		return inject.ReleaseJobsCopy, "reading the API server's version: " + err.Error()
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return inject.ReleaseJobsCopy, "listing the nodes (set releaseJobs to image or copy when the operator may not): " + err.Error()
	}
	return releaseJobsFor(info.GitVersion, nodes.Items)
}

// releaseJobsFor decides detectReleaseJobs from the API server's version
// and the nodes.
func releaseJobsFor(server string, nodes []corev1.Node) (inject.ReleaseJobs, string) {
	if v, err := version.ParseGeneric(server); err != nil || v.LessThan(imageVolumeKube) {
		return inject.ReleaseJobsCopy, fmt.Sprintf("API server %s: image volumes need Kubernetes %s", server, imageVolumeKube)
	}
	if len(nodes) == 0 {
		return inject.ReleaseJobsCopy, "no node to check the container runtime of"
	}
	for _, n := range nodes {
		ni := n.Status.NodeInfo
		if v, err := version.ParseGeneric(ni.KubeletVersion); err != nil || v.LessThan(imageVolumeKube) {
			return inject.ReleaseJobsCopy, fmt.Sprintf("node %s: kubelet %s: image volumes need %s", n.Name, ni.KubeletVersion, imageVolumeKube)
		}
		runtime, ver, _ := strings.Cut(ni.ContainerRuntimeVersion, "://")
		least, known := imageVolumeCRI[runtime]
		if v, err := version.ParseGeneric(ver); !known || err != nil || v.LessThan(least) {
			return inject.ReleaseJobsCopy, fmt.Sprintf("node %s: runtime %s does not mount image volumes (containerd %s, CRI-O %s do)",
				n.Name, ni.ContainerRuntimeVersion, imageVolumeCRI["containerd"], imageVolumeCRI["cri-o"])
		}
	}
	return inject.ReleaseJobsImage, fmt.Sprintf("API server %s and the %d nodes' kubelets and runtimes mount image volumes", server, len(nodes))
}

package manager

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bosh-injector/bosh-injector/inject"
)

func TestReleaseJobsFor(t *testing.T) {
	node := func(name, kubelet, runtime string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet, ContainerRuntimeVersion: runtime}}}
	}
	for _, c := range []struct {
		server string
		nodes  []corev1.Node
		want   inject.ReleaseJobs
		why    string
	}{
		{"v1.37.2", []corev1.Node{node("n1", "v1.37.2", "containerd://v2.4.2"), node("n2", "v1.36.0", "cri-o://1.36.1")}, inject.ReleaseJobsImage, "2 nodes"},
		{"v1.35.3", []corev1.Node{node("n1", "v1.37.2", "containerd://v2.4.2")}, inject.ReleaseJobsCopy, "API server v1.35.3"},
		{"v1.37.2", []corev1.Node{node("n1", "v1.37.2", "containerd://v2.4.2"), node("old", "v1.37.2", "containerd://1.7.20")}, inject.ReleaseJobsCopy, "node old: runtime containerd://1.7.20"},
		{"v1.37.2", []corev1.Node{node("old", "v1.34.1", "containerd://v2.4.2")}, inject.ReleaseJobsCopy, "node old: kubelet v1.34.1"},
		{"v1.37.2", []corev1.Node{node("n1", "v1.37.2", "docker://28.0.1")}, inject.ReleaseJobsCopy, "docker://28.0.1 does not mount"},
		{"v1.37.2", nil, inject.ReleaseJobsCopy, "no node"},
	} {
		got, why := releaseJobsFor(c.server, c.nodes)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s %v: %s (%s), want %s (%s)", c.server, c.nodes, got, why, c.want, c.why)
		}
	}
}

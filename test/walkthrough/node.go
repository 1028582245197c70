package walkthrough

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/test/podman"
)

// Pod is a pod of the walkthrough, running on its node.
type Pod interface {
	// Key names the pod in the cluster.
	Key() client.ObjectKey
	// Wait waits until every container has ended (or a failed init
	// container stopped the pod) and returns how each did.
	Wait(ctx context.Context, timeout time.Duration) ([]podman.ContainerResult, error)
	// WaitForLog waits until a container's log holds text and returns it.
	WaitForLog(ctx context.Context, container, text string, timeout time.Duration) (string, error)
}

// node runs the walkthrough's pods: podman on this machine, standing in
// for a kubelet, or a real cluster's kubelets.
type node interface {
	// start runs pod.
	start(ctx context.Context, pod *corev1.Pod) (Pod, error)
	// results are the pod's containers now, reported to the pod's status
	// when no kubelet does.
	results(ctx context.Context, p Pod) ([]podman.ContainerResult, error)
	// where says where pods run, for the narration.
	where() string
	stop() error
}

// podmanNode runs pods under podman with test/podman's kubelet stand-in.
type podmanNode struct {
	kubelet *podman.Kubelet
	client  client.Client
	runs    []*podman.Run
}

// start runs pod; one that talks to the apiserver does so with its
// service-account token (see podman.Kubelet.API).
func (n *podmanNode) start(ctx context.Context, pod *corev1.Pod) (Pod, error) {
	run, err := n.kubelet.Start(ctx, pod, "")
	if run != nil {
		n.runs = append(n.runs, run)
	}
	return run, err
}

func (n *podmanNode) results(ctx context.Context, p Pod) ([]podman.ContainerResult, error) {
	run := p.(*podman.Run)
	results := run.Results()
	if err := run.Report(ctx, n.client, results); err != nil {
		return results, err
	}
	return results, run.ReportProbeFailures(ctx, n.client, results)
}

func (n *podmanNode) where() string { return "under podman" }

func (n *podmanNode) stop() error {
	var errs []error
	for _, r := range n.runs {
		errs = append(errs, r.Remove())
	}
	return errors.Join(errs...)
}

// clusterNode is a real cluster: its kubelets run the pods and report
// their status; logs come through the apiserver.
type clusterNode struct {
	client    client.Client
	clientset kubernetes.Interface
}

type clusterPod struct {
	node *clusterNode
	key  client.ObjectKey
}

func (n *clusterNode) start(_ context.Context, pod *corev1.Pod) (Pod, error) {
	return &clusterPod{node: n, key: client.ObjectKeyFromObject(pod)}, nil
}

func (n *clusterNode) results(ctx context.Context, p Pod) ([]podman.ContainerResult, error) {
	var pod corev1.Pod
	if err := n.client.Get(ctx, p.Key(), &pod); err != nil {
		return nil, err
	}
	results, _ := resultsOf(&pod)
	return results, nil
}

func (n *clusterNode) where() string { return "on the cluster" }

func (n *clusterNode) stop() error { return nil }

func (p *clusterPod) Key() client.ObjectKey { return p.key }

func (p *clusterPod) Wait(ctx context.Context, timeout time.Duration) ([]podman.ContainerResult, error) {
	var results []podman.ContainerResult
	err := poll(ctx, timeout, "pod "+p.key.String()+" to end", func() (bool, error) {
		var pod corev1.Pod
		if err := p.node.client.Get(ctx, p.key, &pod); err != nil {
			return false, err
		}
		var ended bool
		results, ended = resultsOf(&pod)
		return ended, nil
	})
	return results, err
}

func (p *clusterPod) WaitForLog(ctx context.Context, container, text string, timeout time.Duration) (string, error) {
	var logs string
	err := poll(ctx, timeout, fmt.Sprintf("container %s of pod %s to log %q", container, p.key, text), func() (bool, error) {
		data, err := p.node.clientset.CoreV1().Pods(p.key.Namespace).GetLogs(p.key.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		logs = string(data)
		return err == nil && strings.Contains(logs, text), nil
	})
	return logs, err
}

// resultsOf reads the containers' results from a pod's status, and whether
// the pod has ended: every container ended, or an init container failed
// (the kubelet restarts it, the walkthrough has seen enough).
func resultsOf(pod *corev1.Pod) ([]podman.ContainerResult, bool) {
	statuses := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		statuses[s.Name] = s
	}
	var results []podman.ContainerResult
	ended, initFailed := true, false
	for i, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		s := statuses[c.Name]
		res := podman.ContainerResult{Name: c.Name}
		t := s.State.Terminated
		if t == nil && s.State.Waiting != nil {
			t = s.LastTerminationState.Terminated
		}
		switch {
		case s.State.Running != nil:
			res.Running = true
			ended = false
		case t != nil:
			res.Ran, res.ExitCode, res.TerminationMessage = true, int(t.ExitCode), t.Message
			initFailed = initFailed || (i < len(pod.Spec.InitContainers) && t.ExitCode != 0)
		default:
			if s.State.Waiting != nil {
				res.Error = s.State.Waiting.Reason + " " + s.State.Waiting.Message
			}
			ended = false
		}
		results = append(results, res)
	}
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	return results, terminal || initFailed || (ended && len(pod.Status.ContainerStatuses) > 0)
}

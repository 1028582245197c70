package walkthrough

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/test/cluster"
)

// Pod is a pod of the walkthrough, as the kubelet runs it: its state is
// the pod's status, its logs come through the apiserver as `kubectl logs`.
type Pod struct {
	w   *Walkthrough
	key client.ObjectKey
}

func (w *Walkthrough) pod(p *corev1.Pod) *Pod { return &Pod{w: w, key: client.ObjectKeyFromObject(p)} }

// Key names the pod in the cluster.
func (p *Pod) Key() client.ObjectKey { return p.key }

// Logs is a container's log so far.
func (p *Pod) Logs(ctx context.Context, container string) (string, error) {
	data, err := p.w.clientset.CoreV1().Pods(p.key.Namespace).GetLogs(p.key.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	return string(data), err
}

// Containers are the containers' states from the pod's status, with the
// logs of those that started.
func (p *Pod) Containers(ctx context.Context) ([]cluster.Container, error) {
	var pod corev1.Pod
	if err := p.w.Client.Get(ctx, p.key, &pod); err != nil {
		return nil, err
	}
	results, _ := cluster.Containers(&pod)
	for i, r := range results {
		if r.Ran || r.Running {
			results[i].Logs, _ = p.Logs(ctx, r.Name)
		}
	}
	return results, nil
}

// Wait waits until the pod has ended (every container ended, or an init
// container failed: the kubelet starts it again, the walkthrough has seen
// enough) and returns how each container did, narrating the pod's phase
// as the kubelet reports it.
func (p *Pod) Wait(ctx context.Context, timeout time.Duration) ([]cluster.Container, error) {
	var results []cluster.Container
	phase := ""
	err := p.w.poll(ctx, timeout, "pod "+p.key.String()+" to end", func() (bool, error) {
		var pod corev1.Pod
		if err := p.w.Client.Get(ctx, p.key, &pod); err != nil {
			return false, err
		}
		if now := string(pod.Status.Phase); now != phase {
			phase = now
			p.w.Say("pod %s: %s", p.key.Name, now)
		}
		var ended bool
		results, ended = cluster.Containers(&pod)
		return ended, nil
	})
	return results, err
}

// WaitForLog waits until a container's log holds text and returns it.
func (p *Pod) WaitForLog(ctx context.Context, container, text string, timeout time.Duration) (string, error) {
	var logs string
	err := p.w.poll(ctx, timeout, fmt.Sprintf("container %s of pod %s to log %q", container, p.key, text), func() (bool, error) {
		var err error
		logs, err = p.Logs(ctx, container)
		return err == nil && strings.Contains(logs, text), nil
	})
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, p.diagnosis(ctx))
	}
	return logs, err
}

// WaitReady waits until the pod is Ready: every container's readiness
// probe (the agent's view of the instance, bin/dns/healthy included)
// answers.
func (p *Pod) WaitReady(ctx context.Context, timeout time.Duration) error {
	err := p.w.poll(ctx, timeout, "pod "+p.key.String()+" to be Ready", func() (bool, error) {
		var pod corev1.Pod
		if err := p.w.Client.Get(ctx, p.key, &pod); err != nil {
			return false, err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, p.diagnosis(ctx))
	}
	return err
}

// diagnosis says why a pod may not have got on: its phase, the conditions
// it has not met, and its events (a pod never scheduled or whose sandbox
// never started has no container state to show).
func (p *Pod) diagnosis(ctx context.Context) string {
	var pod corev1.Pod
	if err := p.w.Client.Get(ctx, p.key, &pod); err != nil {
		return "pod: " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s: phase %s on node %q", p.key, pod.Status.Phase, pod.Spec.NodeName)
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, "\n  condition %s: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	var events corev1.EventList
	if err := p.w.Client.List(ctx, &events, client.InNamespace(p.key.Namespace)); err == nil {
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == p.key.Name {
				fmt.Fprintf(&b, "\n  event %s %s (x%d): %s", e.Type, e.Reason, e.Count, e.Message)
			}
		}
	}
	return b.String()
}

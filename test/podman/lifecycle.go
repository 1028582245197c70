package podman

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What the kubelet stand-in does beyond playing a pod: exec readiness probes,
// and a deletion with preStop hooks and the termination grace.

// probe runs container's exec readiness probe, as a kubelet does, and says
// whether it passed and what it printed. Containers without one are ready
// once running.
func (r *Run) probe(ctx context.Context, c corev1.Container) (bool, string) {
	p := c.ReadinessProbe
	if p == nil || p.Exec == nil {
		return true, ""
	}
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := Command(ctx, append([]string{"exec", r.Pod.Name + "-" + c.Name}, p.Exec.Command...)...).CombinedOutput()
	return err == nil, string(out)
}

// ReportProbeFailures records a Warning Event "Unhealthy" for every running
// container whose readiness probe failed, with the probe's output, as a
// kubelet does; `kubectl describe pod` shows them.
func (r *Run) ReportProbeFailures(ctx context.Context, c client.Client, results []ContainerResult) error {
	var pod corev1.Pod
	if err := c.Get(ctx, r.source, &pod); err != nil {
		return err
	}
	var errs []error
	for _, res := range results {
		if !res.Running || res.Ready {
			continue
		}
		now := metav1.NewTime(time.Now())
		errs = append(errs, c.Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
				FieldPath: "spec.containers{" + res.Name + "}"},
			Reason: "Unhealthy", Type: corev1.EventTypeWarning, Message: "Readiness probe failed: " + res.ProbeOutput,
			Source: corev1.EventSource{Component: "kubelet", Host: "podman"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}))
	}
	return errors.Join(errs...)
}

// Delete stops the pod as a kubelet does when it is deleted: every
// container's preStop exec hook runs, all in parallel; each container then
// gets SIGTERM and, once the pod's termination grace (counted from the start
// of the hooks) is over, SIGKILL. It returns what the hooks printed, by
// container.
func (r *Run) Delete(ctx context.Context) (map[string]string, error) {
	grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	if g := r.Pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	deadline := time.Now().Add(grace)
	hookCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var mu sync.Mutex
	hooks := map[string]string{}
	var wg sync.WaitGroup
	var errs []error
	for _, c := range r.Pod.Spec.Containers {
		wg.Go(func() {
			name := r.Pod.Name + "-" + c.Name
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Exec != nil {
				out, err := Command(hookCtx, append([]string{"exec", name}, c.Lifecycle.PreStop.Exec.Command...)...).CombinedOutput()
				if err != nil {
					// A kubelet records FailedPreStopHook and stops the
					// container all the same.
					out = fmt.Appendf(out, "\n(preStop hook failed: %v)", err)
				}
				mu.Lock()
				hooks[c.Name] = string(out)
				mu.Unlock()
			}
			left := max(int(time.Until(deadline).Seconds()), 0)
			if _, err := podman("stop", "-t", strconv.Itoa(left), name); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return hooks, errors.Join(errs...)
}

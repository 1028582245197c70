package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/test/podman"
)

// node stands in for a node's kubelet for as long as the sandbox runs: every
// pod the apiserver stores in its namespace runs under podman (test/podman's
// kubelet stand-in), its status follows its containers, and a pod deleted
// from the apiserver is removed from podman. Unlike the walkthrough, which
// starts the pods it narrates, nothing here is told which pods to run:
// the StatefulSets, Jobs and gathering Jobs the user applied decide.
type node struct {
	kubelet   *podman.Kubelet
	client    client.Client
	namespace string

	mu     sync.Mutex
	pods   map[types.UID]*nodePod
	starts sync.WaitGroup
	// slots bounds the pods starting at once: kube play copies whole
	// release images into volumes.
	slots chan struct{}
}

// nodePod is a pod the node runs, and what it last saw of it.
type nodePod struct {
	run      *podman.Run
	starting bool
	// deleting: the pod is being stopped, as the apiserver asked.
	deleting bool
	// err is why the pod could not be started.
	err     error
	results []podman.ContainerResult
	// restarts counts, by container, the times it was started again.
	restarts map[string]int
	reported string
	checked  time.Time
}

// recheck is how often a pod whose containers settled (all running and
// ready, or all ended) is looked at again: a process may still exit.
const recheck = 10 * time.Second

func newNode(kubelet *podman.Kubelet, c client.Client, namespace string) *node {
	return &node{kubelet: kubelet, client: c, namespace: namespace, pods: map[types.UID]*nodePod{}, slots: make(chan struct{}, 3)}
}

// run syncs until ctx ends.
func (n *node) run(ctx context.Context) {
	for ctx.Err() == nil {
		n.sync(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// sync starts the pods not running yet, reports the containers of those
// that changed and removes those gone from the apiserver.
func (n *node) sync(ctx context.Context) {
	var pods corev1.PodList
	if err := n.client.List(ctx, &pods, client.InNamespace(n.namespace)); err != nil {
		return
	}
	listed := map[types.UID]bool{}
	for _, p := range pods.Items {
		listed[p.UID] = true
	}
	n.mu.Lock()
	for uid, p := range n.pods {
		if !listed[uid] {
			if p.run != nil {
				_ = p.run.Remove()
			}
			delete(n.pods, uid)
		}
	}
	n.mu.Unlock()
	for i := range pods.Items {
		pod := &pods.Items[i]
		n.mu.Lock()
		p, known := n.pods[pod.UID]
		if pod.DeletionTimestamp != nil {
			if !known || !p.starting && !p.deleting {
				n.delete(ctx, pod, p)
			}
			n.mu.Unlock()
			continue
		}
		var seen nodePod
		if known {
			seen = *p
		}
		n.mu.Unlock()
		if !known || !seen.starting && seen.run == nil && time.Since(seen.checked) > recheck {
			// Started, or tried again as a kubelet retries a pod whose
			// Secrets or images were missing. Pods start in parallel: kube
			// play returns once the init containers ended.
			n.start(ctx, pod)
			continue
		}
		if seen.starting || seen.run == nil || settled(seen.results) && (!running(seen.results) || time.Since(seen.checked) < recheck) {
			continue
		}
		results := seen.run.Results()
		// As a kubelet, start exited processes again after a back-off,
		// reported waiting: the pod does not fail meanwhile (its
		// StatefulSet would replace it, under a new address).
		restarts := maps.Clone(seen.restarts)
		for _, i := range toRestart(pod, results) {
			name := results[i].Name
			if time.Since(results[i].FinishedAt) >= restartBackoff && seen.run.Restart(name) == nil {
				if restarts == nil {
					restarts = map[string]int{}
				}
				restarts[name]++
			}
			results[i].Restarting, results[i].Restarts = true, restarts[name]
		}
		reported := seen.reported
		if sig := signature(results); sig != seen.reported && seen.run.Report(ctx, n.client, results) == nil {
			reported = sig
		}
		n.mu.Lock()
		p.results, p.checked, p.reported, p.restarts = results, time.Now(), reported, restarts
		n.mu.Unlock()
	}
}

// start plays pod in the background; gathering Jobs' pods reach the
// apiserver with their service-account tokens (see podman.Kubelet.API).
func (n *node) start(ctx context.Context, pod *corev1.Pod) {
	p := &nodePod{starting: true}
	n.mu.Lock()
	n.pods[pod.UID] = p
	n.mu.Unlock()
	n.starts.Go(func() {
		n.slots <- struct{}{}
		run, err := n.kubelet.Start(ctx, pod, "")
		<-n.slots
		if err != nil && run != nil {
			// kube play failed as a whole: nothing of the pod runs.
			_ = run.Remove()
			run = nil
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		p.run, p.err, p.checked, p.starting = run, err, time.Now(), false
	})
}

// delete stops a pod the apiserver marked for deletion, preStop hooks and
// grace included, and then removes it from the apiserver, as a kubelet
// confirms a pod's termination: without that the pod stays Terminating and
// its StatefulSet never makes it again. n.mu is held; p is nil for a pod
// the node does not run.
func (n *node) delete(ctx context.Context, pod *corev1.Pod, p *nodePod) {
	if p == nil {
		p = &nodePod{}
		n.pods[pod.UID] = p
	}
	p.deleting = true
	run := p.run
	n.starts.Go(func() {
		if run != nil {
			_, _ = run.Delete(ctx)
			_ = run.Remove()
		}
		zero := int64(0)
		err := n.client.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if client.IgnoreNotFound(err) != nil {
			// Tried again at the next sync.
			n.mu.Lock()
			p.deleting, p.run = false, nil
			n.mu.Unlock()
		}
	})
}

// state is what the node knows of the pod of uid: its containers' results,
// or why it could not start it; ok is false for a pod it did not see yet.
func (n *node) state(uid types.UID) (results []podman.ContainerResult, startErr error, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pods[uid]
	if p == nil {
		return nil, nil, false
	}
	return p.results, p.err, p.results != nil || p.err != nil
}

// runOf is the podman run of the pod of uid, nil when there is none.
func (n *node) runOf(uid types.UID) *podman.Run {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.pods[uid]; p != nil {
		return p.run
	}
	return nil
}

// stop removes every pod the node runs, once the starts under way ended;
// run must have returned.
func (n *node) stop() {
	n.starts.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	for uid, p := range n.pods {
		if p.run != nil {
			_ = p.run.Remove()
		}
		delete(n.pods, uid)
	}
}

// restartBackoff is how long after it exited a container is started again,
// a kubelet's first crash-loop back-off.
const restartBackoff = 10 * time.Second

// toRestart are the indexes in results of the containers (not init
// containers) of pod that exited and that a kubelet would start again under
// its restart policy.
func toRestart(pod *corev1.Pod, results []podman.ContainerResult) []int {
	var out []int
	for i, r := range results {
		main := slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == r.Name })
		if !main || !r.Ran {
			continue
		}
		switch pod.Spec.RestartPolicy {
		case corev1.RestartPolicyAlways, "":
			out = append(out, i)
		case corev1.RestartPolicyOnFailure:
			if r.ExitCode != 0 {
				out = append(out, i)
			}
		}
	}
	return out
}

// settled says the containers will not change by themselves: every one
// running and ready, or ended, or an init container failed.
func settled(results []podman.ContainerResult) bool {
	if len(results) == 0 {
		return false
	}
	for _, r := range results {
		if r.Restarting {
			return false
		}
		if r.Ran && r.ExitCode != 0 {
			return true
		}
		if !r.Ran && !(r.Running && r.Ready) {
			return false
		}
	}
	return true
}

// running says some container is running, and may still exit.
func running(results []podman.ContainerResult) bool {
	return slices.ContainsFunc(results, func(r podman.ContainerResult) bool { return r.Running })
}

// signature is what of results a pod's status shows.
func signature(results []podman.ContainerResult) string {
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "%s:%t:%t:%t:%d;", r.Name, r.Running, r.Ready, r.Ran, r.ExitCode)
	}
	return b.String()
}

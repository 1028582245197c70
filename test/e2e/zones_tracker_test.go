package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/bosh-injector/bosh-injector/test/progress"
)

// tracker follows a group's pods through a watch, as a user's `kubectl get
// pods -w` would, and keeps the most instances it ever saw unavailable:
// missing, terminating or not Ready.
type tracker struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod
	// changes counts the watch's events: a wait lasts while they come.
	changes int
	want    int
	worst   int
	seen    []string
	// removing are pods a scale-down removes; mostRemoving the most of
	// them seen terminating at once.
	removing     []string
	mostRemoving int
}

func track(ctx context.Context, cs kubernetes.Interface, ns, selector string) *tracker {
	tr := &tracker{pods: map[string]*corev1.Pod{}}
	go func() {
		for ctx.Err() == nil {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			tr.mu.Lock()
			tr.pods = map[string]*corev1.Pod{}
			for i := range list.Items {
				tr.pods[list.Items[i].Name] = &list.Items[i]
			}
			tr.update("listed")
			tr.mu.Unlock()
			w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					break
				}
				tr.mu.Lock()
				if ev.Type == watch.Deleted {
					delete(tr.pods, pod.Name)
				} else {
					tr.pods[pod.Name] = pod
				}
				tr.changes++
				tr.update(string(ev.Type) + " " + pod.Name)
				tr.mu.Unlock()
			}
			w.Stop()
		}
	}()
	return tr
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// update records the unavailable count after an event; mu held.
func (tr *tracker) update(what string) {
	n := 0
	for _, p := range tr.pods {
		if podReady(p) {
			n++
		}
	}
	if tr.want > 0 {
		tr.worst = max(tr.worst, tr.want-n)
	}
	terminating := 0
	for _, name := range tr.removing {
		if p := tr.pods[name]; p != nil && p.DeletionTimestamp != nil {
			terminating++
		}
	}
	tr.mostRemoving = max(tr.mostRemoving, terminating)
	tr.seen = append(tr.seen, fmt.Sprintf("%s: %d of %d Ready", what, n, tr.want))
}

// expect starts counting unavailability against want instances afresh.
func (tr *tracker) expect(want int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.want, tr.worst, tr.seen = want, 0, nil
}

// expectRemoved starts counting pods terminating at once among removing.
func (tr *tracker) expectRemoved(removing []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.removing, tr.mostRemoving = removing, 0
}

func (tr *tracker) mostRemovedAtOnce() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.mostRemoving
}

func (tr *tracker) worstUnavailable() (int, string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.worst, strings.Join(tr.seen, "\n")
}

// waitFor polls the pods the watch holds until done is true of them,
// while the pods keep changing: it fails once they did not change for
// timeout (see package progress).
func (tr *tracker) waitFor(t *testing.T, timeout time.Duration, what string, done func(pods map[string]*corev1.Pod) bool) map[string]*corev1.Pod {
	t.Helper()
	var pods map[string]*corev1.Pod
	changes := func() string {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return strconv.Itoa(tr.changes)
	}
	err := progress.UntilChanging(context.Background(), what, timeout, changes, func() (bool, error) {
		tr.mu.Lock()
		pods = maps.Clone(tr.pods)
		tr.mu.Unlock()
		return done(pods), nil
	})
	if err != nil {
		var states []string
		for _, name := range slices.Sorted(maps.Keys(pods)) {
			p := pods[name]
			states = append(states, fmt.Sprintf("%s on %s: ready %v, deleting %v, %s", name, p.Spec.NodeName, podReady(p), p.DeletionTimestamp != nil, p.Status.Phase))
		}
		t.Fatalf("%v; pods:\n%s", err, strings.Join(states, "\n"))
	}
	return pods
}

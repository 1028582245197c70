package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/deploy"
	"github.com/bosh-injector/bosh-injector/gather/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/objects"
	"github.com/bosh-injector/bosh-injector/gather/runner"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// TestDeploy deploys as a director does, on the node: the rollout fixture's
// groups db, api (three instances over two AZs, one canary, one at a time)
// and worker, changed in all three, are replaced in that order, each pod
// after the one before it is Ready; a change whose post-start fails on api
// stops at api's canary, the deploy's status and an Event naming it and
// why, the other instances keeping their version and serving; fixing the
// manifest completes the deploy.
func TestDeploy(t *testing.T) {
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)
	const ns = "rollout"
	manifestKey := client.ObjectKey{Namespace: ns, Name: "rollout-manifest"}
	apply := func(ops ...string) {
		t.Helper()
		status, err := w.Deploy(ctx, ns, fixtures.Deployment("rollout", releaseURL, ops...))
		if err != nil || status.State != runner.ReasonGathered {
			t.Fatalf("gathering: %v %+v", err, status)
		}
	}
	// deployed waits for the deploy of the accepted versions to end in phase.
	deployed := func(phase string, timeout time.Duration) deploy.Status {
		t.Helper()
		var st deploy.Status
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			var s corev1.Secret
			if err := w.Client.Get(ctx, manifestKey, &s); err != nil {
				return false, err
			}
			st = deploy.StatusOf(&s)
			return st.Phase == phase && s.Labels[names.LabelDeployState] == phase, nil
		})
		if err != nil {
			t.Fatalf("deploy not %s: %v; status %+v\n%s", phase, err, st, w.OperatorLogs(ctx))
		}
		return st
	}

	apply()
	var manifest corev1.Secret
	if err := w.Client.Get(ctx, manifestKey, &manifest); err != nil {
		t.Fatal(err)
	}
	rec := record(ctx, t, w, ns)
	res, err := objects.Build(manifest.Data[names.ManifestKey], deployment.OpsFilesOf(manifest.Data), objects.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if o.GetObjectKind().GroupVersionKind().Kind == "Secret" {
			continue
		}
		if err := w.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	pods := []string{"rollout-db-z1-0", "rollout-api-z1-1", "rollout-api-z1-0", "rollout-api-z2-0", "rollout-worker-z1-0"}
	rec.waitReady(t, pods, nil, 3*time.Minute)
	deployed(deploy.PhaseDeployed, time.Minute)

	t.Run("groups in order, api's canary first, then one at a time", func(t *testing.T) {
		before := rec.uids()
		apply("rollout-change.yml")
		st := deployed(deploy.PhaseDeployed, 4*time.Minute)
		if st.Updated != 5 || st.Total != 5 {
			t.Errorf("deploy status %+v, want 5 of 5 instances updated", st)
		}
		rec.waitReady(t, pods, before, time.Minute)
		order := rec.replaced(before)
		if !slices.Equal(order, pods) {
			t.Fatalf("pods replaced in order %v, want %v\n%s", order, pods, rec.log())
		}
		// Each pod is replaced after the one before it is Ready again.
		for i := 1; i < len(pods); i++ {
			if ready, next := rec.readyAt(pods[i-1], before), rec.terminatingAt(pods[i], before); ready == 0 || next < ready {
				t.Errorf("%s replaced (event %d) before %s was Ready again (event %d)\n%s", pods[i], next, pods[i-1], ready, rec.log())
			}
		}
	})

	t.Run("a failing post-start stops the deploy at api's canary; fixing the manifest completes it", func(t *testing.T) {
		before := rec.uids()
		apply("rollout-change.yml", "rollout-bad-canary.yml")
		st := deployed(deploy.PhaseFailed, 3*time.Minute)
		for _, want := range []string{"'api/2 (rollout-api-z1-1)' is not running after update.", "post-start", "cannot reach the database"} {
			if !strings.Contains(st.Message, want) {
				t.Errorf("deploy message %q does not say %q", st.Message, want)
			}
		}
		if err := hasEvent(ctx, w, ns, deploy.ReasonDeployFailed, "deploy stopped at instance group 'api'"); err != nil {
			t.Error(err)
		}
		// Exactly the canary was replaced; the others keep their version
		// and stay Ready, worker too.
		if order := rec.replaced(before); !slices.Equal(order, []string{"rollout-api-z1-1"}) {
			t.Errorf("pods replaced %v, want only api's canary\n%s", order, rec.log())
		}
		rec.waitReady(t, []string{"rollout-db-z1-0", "rollout-api-z1-0", "rollout-api-z2-0", "rollout-worker-z1-0"}, nil, time.Second)
		if err := w.Client.Get(ctx, manifestKey, &manifest); err != nil {
			t.Fatal(err)
		}
		if got := manifest.Labels[names.LabelDeployState]; got != deploy.PhaseFailed {
			t.Errorf("label %s is %q", names.LabelDeployState, got)
		}

		before = rec.uids()
		apply("rollout-change.yml", "rollout-fix.yml")
		deployed(deploy.PhaseDeployed, 4*time.Minute)
		rec.waitReady(t, pods[1:], before, time.Minute)
		if order := rec.replaced(before); !slices.Equal(order, pods[1:]) {
			t.Errorf("pods replaced %v, want %v\n%s", order, pods[1:], rec.log())
		}
	})
}

// hasEvent checks that namespace ns has an Event of reason whose note
// contains text.
func hasEvent(ctx context.Context, w *walkthrough.Walkthrough, ns, reason, text string) error {
	var events corev1.EventList
	if err := w.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return err
	}
	var said []string
	for _, e := range events.Items {
		if e.Reason == reason && strings.Contains(e.Message, text) {
			return nil
		}
		said = append(said, e.Reason+": "+e.Message)
	}
	return fmt.Errorf("no %s Event saying %q among:\n%s", reason, text, strings.Join(said, "\n"))
}

// recorder watches a namespace's pods and records, per pod UID, the
// position in the API server's order of events at which it was first seen
// terminating and first seen Ready: a controller's reaction always comes
// after what it reacted to.
type recorder struct {
	mu     sync.Mutex
	seq    int
	seen   map[types.UID]*podRecord
	byName map[string][]*podRecord
	events []string
}

type podRecord struct {
	name               string
	uid                types.UID
	terminating, ready int
}

func record(ctx context.Context, t *testing.T, w *walkthrough.Walkthrough, ns string) *recorder {
	t.Helper()
	r := &recorder{seen: map[types.UID]*podRecord{}, byName: map[string][]*podRecord{}}
	pods := w.Cluster.Clientset.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		r.observe(&list.Items[i])
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { rw.Stop(); <-done })
	go func() {
		defer close(done)
		for e := range rw.ResultChan() {
			if p, ok := e.Object.(*corev1.Pod); ok {
				r.observe(p)
			}
		}
	}()
	return r
}

// observe records the instances' pods, those of StatefulSets.
func (r *recorder) observe(p *corev1.Pod) {
	if !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "StatefulSet" }) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	pr := r.seen[p.UID]
	if pr == nil {
		pr = &podRecord{name: p.Name, uid: p.UID}
		r.seen[p.UID] = pr
		r.byName[p.Name] = append(r.byName[p.Name], pr)
		r.events = append(r.events, fmt.Sprintf("%4d %s created (%s)", r.seq, p.Name, p.UID))
	}
	if p.DeletionTimestamp != nil && pr.terminating == 0 {
		pr.terminating = r.seq
		r.events = append(r.events, fmt.Sprintf("%4d %s terminating", r.seq, p.Name))
	}
	if pr.ready == 0 && p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}) {
		pr.ready = r.seq
		r.events = append(r.events, fmt.Sprintf("%4d %s ready", r.seq, p.Name))
	}
}

// uids are the newest pod of each name.
func (r *recorder) uids() map[string]types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]types.UID{}
	for name, prs := range r.byName {
		out[name] = prs[len(prs)-1].uid
	}
	return out
}

// replaced are the pods whose pod of before was seen terminating, in the
// order they were.
func (r *recorder) replaced(before map[string]types.UID) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var prs []*podRecord
	for _, uid := range before {
		if pr := r.seen[uid]; pr != nil && pr.terminating != 0 {
			prs = append(prs, pr)
		}
	}
	slices.SortFunc(prs, func(a, b *podRecord) int { return a.terminating - b.terminating })
	var out []string
	for _, pr := range prs {
		out = append(out, pr.name)
	}
	return out
}

func (r *recorder) terminatingAt(name string, before map[string]types.UID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pr := r.seen[before[name]]; pr != nil {
		return pr.terminating
	}
	return 0
}

// readyAt is when the pod of name that replaced before's was Ready.
func (r *recorder) readyAt(name string, before map[string]types.UID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pr := range r.byName[name] {
		if pr.uid != before[name] && pr.ready != 0 {
			return pr.ready
		}
	}
	return 0
}

// waitReady waits until each pod named has a Ready pod, one other than
// before's when before is given.
func (r *recorder) waitReady(t *testing.T, pods []string, before map[string]types.UID, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing := slices.DeleteFunc(slices.Clone(pods), func(name string) bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			prs := r.byName[name]
			if len(prs) == 0 {
				return false
			}
			pr := prs[len(prs)-1]
			return pr.terminating == 0 && pr.ready != 0 && (before == nil || pr.uid != before[name])
		})
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not Ready after %s: %v\n%s", timeout, missing, r.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (r *recorder) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "\n")
}

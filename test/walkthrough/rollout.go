package walkthrough

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/progress"
)

// RolloutPods are the rollout fixture's instances in the order a director
// updates them: db, api's canary (its first AZ's highest ordinal, which the
// partition releases first), api's others one at a time AZ by AZ, worker.
var RolloutPods = []string{"rollout-db-z1-0", "rollout-api-z1-1", "rollout-api-z1-0", "rollout-api-z2-0", "rollout-worker-z1-0"}

// FirstDeployPods are the rollout fixture's instances in the order its
// first deploy starts them: db, api's canary (its first AZ's lowest index),
// api's others AZ by AZ, worker.
var FirstDeployPods = []string{"rollout-db-z1-0", "rollout-api-z1-0", "rollout-api-z1-1", "rollout-api-z2-0", "rollout-worker-z1-0"}

// Rollout deploys the rollout fixture (groups db, api with three instances
// over two AZs, one canary and one at a time, worker) from the objects
// `bosh-injector objects` prints, in namespace ns, and narrates three
// changes as the deploy controller rolls them: one to every group, updated
// in order, each pod after the one before it is Ready again; one whose
// post-start fails on api, which stops at api's canary with the others
// still serving; its fix, which completes the deploy. It fails when any of
// that does not happen.
func (w *Walkthrough) Rollout(ctx context.Context, ns, releaseURL string) error {
	manifestKey := client.ObjectKey{Namespace: ns, Name: "rollout-manifest"}
	apply := func(ops ...string) error {
		gst, err := w.Deploy(ctx, ns, fixtures.Deployment("rollout", releaseURL, ops...))
		if err == nil && gst.State != status.ReasonGathered {
			err = fmt.Errorf("gathering the rollout deployment: %s", strings.TrimSpace(gst.State+" "+gst.Message))
		}
		return err
	}
	deployed := func(phase string, timeout time.Duration) (status.Deploy, error) {
		var st status.Deploy
		err := w.poll(ctx, timeout, "the deploy to be "+phase, func() (bool, error) {
			var s corev1.Secret
			if err := w.Client.Get(ctx, manifestKey, &s); err != nil {
				return false, err
			}
			var current bool
			st, current = status.CurrentDeploy(&s)
			return current && st.Phase == phase && s.Labels[names.LabelDeployState] == phase, nil
		})
		return st, err
	}

	if err := apply(); err != nil {
		return err
	}
	rec, err := w.record(ctx, ns)
	if err != nil {
		return err
	}
	defer rec.stop()
	w.Step("The rollout deployment's objects, as `bosh-injector objects` prints them: StatefulSets %s", "rollout-{db-z1,api-z1,api-z2,worker-z1}")
	var manifest corev1.Secret
	if err := w.Client.Get(ctx, manifestKey, &manifest); err != nil {
		return err
	}
	res, err := objects.Build(manifest.Data[names.ManifestKey], deployment.OpsFilesOf(manifest.Data), objects.Options{Namespace: ns,
		// The one node has no zone: its AZs are the scheduler's to place.
		Placement: objects.Placement{NoZoneAffinity: true}})
	if err != nil {
		return err
	}
	for _, o := range res.Objects {
		if o.GetObjectKind().GroupVersionKind().Kind == "Secret" {
			continue
		}
		if err := w.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if err := rec.waitReady(RolloutPods, nil, 3*time.Minute); err != nil {
		return err
	}
	if _, err := deployed(status.PhaseDeployed, time.Minute); err != nil {
		return err
	}
	// Held by the deploy's scheduling gate, each instance is scheduled
	// only once the one before it is Ready.
	for i := 1; i < len(FirstDeployPods); i++ {
		if ready, next := rec.readyAt(FirstDeployPods[i-1], nil), rec.scheduledAt(FirstDeployPods[i]); ready == 0 || next < ready {
			return fmt.Errorf("%s was scheduled before %s was Ready\n%s", FirstDeployPods[i], FirstDeployPods[i-1], rec.log())
		}
	}
	w.Say("started in order, each scheduled once the one before was Ready: %s", strings.Join(FirstDeployPods, ", "))

	w.Step("A change to every group: the deploy controller updates them as a director does, in manifest order, api's canary first, then one at a time, each after the one before is Ready")
	before := rec.uids()
	if err := apply("rollout-change.yml"); err != nil {
		return err
	}
	st, err := deployed(status.PhaseDeployed, 4*time.Minute)
	if err != nil {
		return err
	}
	if err := rec.waitReady(RolloutPods, before, time.Minute); err != nil {
		return err
	}
	order := rec.replaced(before)
	w.Say("replaced, in order: %s (%d of %d instances updated)", strings.Join(order, ", "), st.Updated, st.Total)
	if !slices.Equal(order, RolloutPods) {
		return fmt.Errorf("pods replaced in order %v, want %v\n%s", order, RolloutPods, rec.log())
	}
	for i := 1; i < len(order); i++ {
		if ready, next := rec.readyAt(order[i-1], before), rec.terminatingAt(order[i], before); ready == 0 || next < ready {
			return fmt.Errorf("%s was replaced before %s was Ready again\n%s", order[i], order[i-1], rec.log())
		}
	}

	w.Step("A change whose post-start fails on api (and one to worker): the deploy stops at api's canary")
	before = rec.uids()
	if err := apply("rollout-change.yml", "rollout-bad-canary.yml"); err != nil {
		return err
	}
	st, err = deployed(status.PhaseFailed, 3*time.Minute)
	if err != nil {
		return err
	}
	w.Say("%s: %s", names.AnnotationDeploy, st.Message)
	replaced := rec.replaced(before)
	if !slices.Equal(replaced, RolloutPods[1:2]) || !strings.Contains(st.Message, "'api/2 (rollout-api-z1-1)' is not running after update.") ||
		!strings.Contains(st.Message, "post-start of job 'echo-server' failed: exit status 1") {
		return fmt.Errorf("the failing change replaced %v, want only api's canary; the deploy says %q\n%s", replaced, st.Message, rec.log())
	}
	serving := slices.DeleteFunc(slices.Clone(RolloutPods), func(p string) bool { return p == RolloutPods[1] })
	if err := rec.waitReady(serving, nil, time.Second); err != nil {
		return err
	}
	w.Say("still serving on their version: %s", strings.Join(serving, ", "))
	if err := w.Events(ctx, ns); err != nil {
		return err
	}

	w.Step("Setting annotation %s to a new value retries the deploy: the failed canary is watched again, and fails again (its post-start is not run again)", names.AnnotationRetryDeploy)
	if err := w.Client.Get(ctx, manifestKey, &manifest); err != nil {
		return err
	}
	patch := client.MergeFrom(manifest.DeepCopy())
	manifest.Annotations[names.AnnotationRetryDeploy] = "1"
	if err := w.Client.Patch(ctx, &manifest, patch); err != nil {
		return err
	}
	if err := w.poll(ctx, 30*time.Second, "the retried deploy", func() (bool, error) {
		var s corev1.Secret
		if err := w.Client.Get(ctx, manifestKey, &s); err != nil {
			return false, err
		}
		st = status.DeployOf(&s)
		return st.Retry == "1" && st.Phase == status.PhaseFailed, nil
	}); err != nil {
		return err
	}
	w.Say("%s: %s, at %s", names.LabelDeployState, st.Phase, st.Step)

	w.Step("The fix: the next change starts a new deploy, which completes")
	before = rec.uids()
	if err := apply("rollout-change.yml", "rollout-fix.yml"); err != nil {
		return err
	}
	if _, err := deployed(status.PhaseDeployed, 4*time.Minute); err != nil {
		return err
	}
	if err := rec.waitReady(RolloutPods[1:], before, time.Minute); err != nil {
		return err
	}
	order = rec.replaced(before)
	w.Say("replaced, in order: %s", strings.Join(order, ", "))
	if !slices.Equal(order, RolloutPods[1:]) {
		return fmt.Errorf("the fix replaced %v, want %v\n%s", order, RolloutPods[1:], rec.log())
	}
	return nil
}

// recorder watches a namespace's instance pods and records, per pod, the
// position in the API server's order of events at which it was first seen
// terminating and first seen Ready: a controller's reaction always comes
// after what it reacted to.
type recorder struct {
	mu     sync.Mutex
	seq    int
	seen   map[types.UID]*podRecord
	byName map[string][]*podRecord
	events []string
	stop   func()
}

type podRecord struct {
	name                          string
	uid                           types.UID
	scheduled, terminating, ready int
}

func (w *Walkthrough) record(ctx context.Context, ns string) (*recorder, error) {
	r := &recorder{seen: map[types.UID]*podRecord{}, byName: map[string][]*podRecord{}}
	pods := w.clientset.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		r.observe(&list.Items[i])
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) },
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	r.stop = func() { rw.Stop(); <-done }
	go func() {
		defer close(done)
		for e := range rw.ResultChan() {
			if p, ok := e.Object.(*corev1.Pod); ok {
				r.observe(p)
			}
		}
	}()
	return r, nil
}

// observe records the pods of StatefulSets.
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
	if p.Spec.NodeName != "" && pr.scheduled == 0 {
		pr.scheduled = r.seq
		r.events = append(r.events, fmt.Sprintf("%4d %s scheduled", r.seq, p.Name))
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

// scheduledAt is when the first pod of name was scheduled.
func (r *recorder) scheduledAt(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prs := r.byName[name]; len(prs) > 0 {
		return prs[0].scheduled
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

// waitReady waits until each pod named is Ready, a pod other than
// before's when before is given.
func (r *recorder) waitReady(pods []string, before map[string]types.UID, timeout time.Duration) error {
	var missing []string
	seq := func() string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return strconv.Itoa(r.seq)
	}
	err := progress.UntilChanging(context.Background(), fmt.Sprintf("%v Ready", pods), timeout, seq, func() (bool, error) {
		missing = slices.DeleteFunc(slices.Clone(pods), func(name string) bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			prs := r.byName[name]
			if len(prs) == 0 {
				return false
			}
			pr := prs[len(prs)-1]
			return pr.terminating == 0 && pr.ready != 0 && (before == nil || pr.uid != before[name])
		})
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %v not Ready\n%s", err, missing, r.log())
	}
	return nil
}

func (r *recorder) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "\n")
}

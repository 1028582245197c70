package day2

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Actions on instances, as the director names them.
const (
	Stop     = "stop"
	Start    = "start"
	Restart  = "restart"
	Recreate = "recreate"
)

// ChangeOptions are a state change's flags and output.
type ChangeOptions struct {
	SkipDrain bool
	// Out gets the progress, a line per instance done, as a task's.
	Out io.Writer
	// Poll is how often an instance is looked at.
	Poll time.Duration
}

// Batch is the instances of one step of a group's update.
type Batch struct {
	Group     string
	Canary    bool
	Instances []Instance
	Watch     update.Watch
}

// Order is the deploy's order for a change of instances: the update
// plan's stages (groups in manifest order; a stage of `serial: false`
// groups together), each group's instances in steps of canaries then
// max_in_flight, AZ by AZ, as gather/model/update computes them. Each stage is
// a list of groups, each group a list of batches.
func Order(plan update.Plan, azs map[string][]string, instances []Instance) ([][][]Batch, error) {
	var out [][][]Batch
	for _, stage := range plan.Stages() {
		var groups [][]Batch
		for _, g := range stage {
			names := azs[g.Name]
			if len(names) == 0 {
				names = []string{""}
			}
			byAZ := make([][]Instance, len(names))
			for _, in := range instances {
				if in.Group == g.Name {
					az := max(slices.Index(names, in.AZ), 0)
					byAZ[az] = append(byAZ[az], in)
				}
			}
			sizes := make([]int, len(byAZ))
			for i, ins := range byAZ {
				sizes[i] = len(ins)
			}
			steps, err := g.Update.Steps(sizes)
			if err != nil {
				return nil, fmt.Errorf("instance group '%s': %w", g.Name, err)
			}
			var batches []Batch
			for _, s := range steps {
				batches = append(batches, Batch{Group: g.Name, Canary: s.Canary, Instances: byAZ[s.AZ][:s.N], Watch: g.Update.Watch(s)})
				byAZ[s.AZ] = byAZ[s.AZ][s.N:]
			}
			if len(batches) > 0 {
				groups = append(groups, batches)
			}
		}
		if len(groups) > 0 {
			out = append(out, groups)
		}
	}
	return out, nil
}

// Change stops, starts, restarts or recreates the instances in the
// deploy's order (Order), a step at a time, each step's instances at once;
// the first instance that fails stops the change, as a failing canary
// stops a deploy.
func (d *Deployment) Change(ctx context.Context, action string, instances []Instance, o ChangeOptions) error {
	for _, in := range instances {
		if err := changeable(in, action); err != nil {
			return fmt.Errorf("Instance '%s' in deployment '%s' cannot %s: %w", in.Name(), d.Name(), action, err)
		}
	}
	plan, err := update.PlanOf(d.Manifest.Raw)
	if err != nil {
		return fmt.Errorf("manifest Secret %s: %w", d.Secret.Name, err)
	}
	azs := map[string][]string{}
	for _, g := range d.Manifest.InstanceGroups {
		azs[g.Name] = g.AZs
	}
	stages, err := Order(plan, azs, instances)
	if err != nil {
		return err
	}
	lines := &syncWriter{w: o.Out}
	o.Out = lines
	for _, stage := range stages {
		errs := make([]error, len(stage))
		var wg sync.WaitGroup
		for i, batches := range stage {
			wg.Go(func() {
				for _, b := range batches {
					if errs[i] = d.batch(ctx, action, b, o, lines); errs[i] != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// changeable denies what the instance cannot do.
func changeable(in Instance, action string) error {
	if in.Pod == nil {
		return fmt.Errorf("it has no pod: see `bosh-injector instances` and the StatefulSet of group '%s'", in.Group)
	}
	if action == Recreate {
		return nil
	}
	for _, p := range ProcessContainers(in.Pod) {
		if p.Monit {
			return fmt.Errorf("job '%s' runs process '%s' from its monit file, which the launcher cannot stop in place: use recreate", p.Job, p.Name)
		}
	}
	if !slices.ContainsFunc(in.Pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == contract.DesiredVolume }) {
		return fmt.Errorf("its pod %s was injected before stop and start existed (no %s volume): recreate it first", in.Pod.Name, contract.DesiredVolume)
	}
	return nil
}

// syncWriter writes whole lines from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) printf(format string, args ...any) { fmt.Fprintf(s, format, args...) }

// batch changes a step's instances at once and reports each as the
// director's task does.
func (d *Deployment) batch(ctx context.Context, action string, b Batch, o ChangeOptions, out *syncWriter) error {
	errs := make([]error, len(b.Instances))
	var wg sync.WaitGroup
	for i, in := range b.Instances {
		wg.Go(func() {
			start := time.Now()
			errs[i] = d.changeOne(ctx, action, in, b.Watch.Max, o)
			canary := ""
			if b.Canary {
				canary = " (canary)"
			}
			took := time.Since(start).Round(time.Second)
			out.printf("%s | Updating instance %s: %s%s (%02d:%02d:%02d)\n", time.Now().UTC().Format("15:04:05"), b.Group, in.FullName(), canary,
				int(took.Hours()), int(took.Minutes())%60, int(took.Seconds())%60)
			if errs[i] != nil {
				out.printf("            L Error: %v\n", errs[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// changeOne takes one instance through the action and waits (up to the
// watch's max, at least a minute for a drain) for its result.
func (d *Deployment) changeOne(ctx context.Context, action string, in Instance, watch time.Duration, o ChangeOptions) error {
	ctx, cancel := context.WithTimeout(ctx, max(watch, time.Minute)+time.Duration(drainSeconds(in.Pod))*time.Second)
	defer cancel()
	switch action {
	case Stop:
		return d.stop(ctx, in, o)
	case Start:
		return d.start(ctx, in, o)
	case Restart:
		if err := d.stop(ctx, in, o); err != nil {
			return err
		}
		return d.start(ctx, in, o)
	case Recreate:
		return d.recreate(ctx, in, o)
	}
	return fmt.Errorf("unknown action %q", action)
}

// drainSeconds is how long the pod's drain may take.
func drainSeconds(pod *corev1.Pod) int64 {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// setDesired sets the pod's desired state (and skip-drain) annotations;
// "" removes them.
func (d *Deployment) setDesired(ctx context.Context, pod *corev1.Pod, state string, skipDrain bool) error {
	annotations := map[string]any{names.AnnotationDesiredState: nil, names.AnnotationSkipDrain: nil}
	if state != "" {
		annotations[names.AnnotationDesiredState] = state
	}
	if skipDrain {
		annotations[names.AnnotationSkipDrain] = "true"
	}
	return d.annotate(ctx, pod, annotations)
}

// annotate merge-patches obj's annotations (a nil value removes one).
func (d *Deployment) annotate(ctx context.Context, obj client.Object, annotations map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	return d.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

// record records on the manifest Secret that the instance is stopped, or
// removes that, before its pod is told: a pod that replaces it, then or
// later, gets the state from the webhook (names.AnnotationStopped).
func (d *Deployment) record(ctx context.Context, in Instance, stopped bool) error {
	var value any
	if stopped {
		value = in.Name()
	}
	// A Secret of its own: the batch's instances are patched at once.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: d.Secret.Namespace, Name: d.Secret.Name}}
	if err := d.annotate(ctx, secret, map[string]any{names.AnnotationStopped(in.Pod.Name): value}); err != nil {
		return fmt.Errorf("recording the state of instance '%s' on manifest Secret %s: %w", in.Name(), d.Secret.Name, err)
	}
	return nil
}

// stop records the instance stopped, asks the pod's launchers to stop and
// waits until every process is stopped and the pod is not Ready (the
// kubelet's readiness probe, failureThreshold probes later), so that its
// Services no longer send it traffic when stop returns, as bosh-dns stops
// answering for a stopped instance; a pod that cannot turn not Ready is a
// warning.
func (d *Deployment) stop(ctx context.Context, in Instance, o ChangeOptions) error {
	if err := d.record(ctx, in, true); err != nil {
		return err
	}
	if err := d.setDesired(ctx, in.Pod, names.DesiredStopped, o.SkipDrain); err != nil {
		return err
	}
	c := unprobed(in.Pod)
	if c != "" {
		fmt.Fprintf(o.Out, "Warning: instance '%s' stops but pod %s stays Ready: its container %s has no readiness probe, so its Services still select it\n", in.Name(), in.Pod.Name, c)
	}
	return d.waitFor(ctx, in, o, "stopped and out of its Services (not Ready)", func(pod *corev1.Pod) (bool, error) {
		return (c != "" || !podstate.Ready(pod)) && d.processState(ctx, pod) == contract.StateStopped, nil
	})
}

// unprobed is a process container of the pod without a readiness probe
// (its jobs have no post-start, no BPM hook): the kubelet counts it Ready
// while it runs, whatever its process does; "" when there is none.
func unprobed(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if c.ReadinessProbe == nil && slices.ContainsFunc(ProcessContainers(pod), func(p Process) bool { return p.Container == c.Name }) {
			return c.Name
		}
	}
	return ""
}

// start records the instance started, asks the pod's launchers to start
// and waits until every process runs, post-start passed and the pod is
// Ready.
func (d *Deployment) start(ctx context.Context, in Instance, o ChangeOptions) error {
	if err := d.record(ctx, in, false); err != nil {
		return err
	}
	if err := d.setDesired(ctx, in.Pod, "", false); err != nil {
		return err
	}
	return d.waitFor(ctx, in, o, "running", func(pod *corev1.Pod) (bool, error) {
		return podstate.Ready(pod) && d.processState(ctx, pod) == contract.StateRunning, nil
	})
}

// processState is the instance's process state as its launchers report
// it; "" when they cannot be asked.
func (d *Deployment) processState(ctx context.Context, pod *corev1.Pod) string {
	st, err := LauncherStatus(ctx, d.Cluster, pod)
	if err != nil {
		return ""
	}
	return StateOf(pod, st).ProcessState
}

// recreate deletes the pod (its preStop hook drains, unless skip-drain)
// and waits until the StatefulSet's new pod, on the same claims, is Ready:
// a stopped instance starts, as a director's recreate leaves it started.
func (d *Deployment) recreate(ctx context.Context, in Instance, o ChangeOptions) error {
	if err := d.record(ctx, in, false); err != nil {
		return err
	}
	if o.SkipDrain {
		if err := d.setDesired(ctx, in.Pod, in.Pod.Annotations[names.AnnotationDesiredState], true); err != nil {
			return err
		}
	}
	old := in.Pod.UID
	if err := d.Client.Delete(ctx, in.Pod, client.Preconditions{UID: &old}); client.IgnoreNotFound(err) != nil {
		return err
	}
	return d.waitFor(ctx, in, o, "recreated and running", func(pod *corev1.Pod) (bool, error) {
		return pod.UID != old && podstate.Ready(pod), nil
	})
}

// waitFor polls the instance's pod until done says so or ctx ends; the
// error then says what the instance is doing and what to do.
func (d *Deployment) waitFor(ctx context.Context, in Instance, o ChangeOptions, what string, done func(*corev1.Pod) (bool, error)) error {
	poll := o.Poll
	if poll == 0 {
		poll = time.Second
	}
	key := client.ObjectKeyFromObject(in.Pod)
	var pod corev1.Pod
	for {
		err := d.Client.Get(ctx, key, &pod)
		if err == nil && pod.DeletionTimestamp == nil {
			ok, err := done(&pod)
			if err != nil || ok {
				return err
			}
		}
		select {
		case <-ctx.Done():
			st, _ := LauncherStatus(context.Background(), d.Cluster, &pod)
			s := StateOf(&pod, st)
			return fmt.Errorf("'%s' is not %s in time (process state %s%s): see `bosh-injector logs -d %s %s` and `kubectl describe pod %s`",
				in.Name(), what, s.ProcessState, reason(s.Reason), d.Name(), in.Name(), key.Name)
		case <-time.After(poll):
		}
	}
}

func reason(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

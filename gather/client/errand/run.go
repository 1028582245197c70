package errand

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/client/cluster"
	"github.com/bosh-injector/bosh-injector/gather/client/instances"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Options are one `run-errand`.
type Options struct {
	Namespace, Deployment, Errand string
	Filters                       []instances.Filter
	// WhenChanged skips the run when nothing it depends on changed since
	// its last successful run; KeepAlive keeps a run Job and its pods.
	WhenChanged, KeepAlive bool
	// Out gets the errand's output and what the run does.
	Out io.Writer
}

// poll is how often a run's Job is looked at.
const poll = time.Second

// Cluster is how Run reaches the cluster: the user's own credentials.
type Cluster = cluster.Cluster

// Run runs an errand and returns its exit status: 0 when every instance's
// run exited 0 (or the run was skipped), else the first failure's.
func Run(ctx context.Context, c Cluster, o Options) (int, error) {
	secret, m, err := cluster.Manifest(ctx, c.Client, o.Namespace, o.Deployment)
	if err != nil {
		return 0, err
	}
	t, err := Resolve(m, o.Errand, o.Filters)
	if err != nil {
		return 0, err
	}
	for _, w := range t.Warnings {
		fmt.Fprintln(o.Out, "Warning:", w)
	}
	versions := status.GatheringOf(secret).Versions
	version := func(group string) (int, error) {
		v, ok := versions[names.LabelValue(group)]
		if !ok {
			return 0, fmt.Errorf("instance group '%s' of deployment '%s' has no gathered version yet (manifest Secret %s, annotation %s): wait for its gathering", group, o.Deployment, secret.Name, names.AnnotationStatus)
		}
		return v, nil
	}
	r := &run{Cluster: c, o: o, out: cluster.NewLines(o.Out), several: len(t.Colocated) > 1}
	var results []result
	if t.Lifecycle != nil {
		v, err := version(t.Lifecycle.Group)
		if err != nil {
			return 0, err
		}
		res, err := r.lifecycle(ctx, *t.Lifecycle, v)
		if err != nil {
			return 0, err
		}
		results = append(results, res...)
	}
	if len(t.Colocated) > 0 {
		res, err := r.colocated(ctx, t.Colocated, version)
		if err != nil {
			return 0, err
		}
		results = append(results, res...)
	}
	return summarize(o.Out, o.Errand, results), nil
}

// result is one instance's run; skipped when --when-changed found nothing
// changed.
type result struct {
	Instance instances.Instance
	Exit     int
	Skipped  bool
	// Why the run failed without an exit status of its own.
	Why string
}

// summarize prints what `bosh run-errand` prints after the output and
// returns the exit status.
func summarize(out io.Writer, errand string, results []result) int {
	code := 0
	skipped := 0
	for _, r := range results {
		if r.Skipped {
			skipped++
			continue
		}
		fmt.Fprintf(out, "\nInstance   %s (%s)\nExit Code  %d\n", r.Instance, r.Instance.ID, r.Exit)
		if r.Why != "" {
			fmt.Fprintf(out, "Error      %s\n", r.Why)
		}
		if r.Exit != 0 && code == 0 {
			code = r.Exit
		}
	}
	switch {
	case skipped == len(results):
		fmt.Fprintf(out, "Errand '%s' skipped: no changes since its last successful run\n", errand)
	case code == 0:
		fmt.Fprintf(out, "\n%d errand(s)\n\nErrand '%s' completed successfully\n", len(results)-skipped, errand)
	default:
		fmt.Fprintf(out, "\n%d errand(s)\n\nErrand '%s' completed with error (exit code %d)\n", len(results)-skipped, errand, code)
	}
	return code
}

type run struct {
	Cluster
	o   Options
	out *cluster.Lines
	// several: output lines are prefixed with their instance.
	several bool
}

// lifecycle runs an errand group's first instance as a new Job made of the
// group's template Job in that instance's AZ.
func (r *run) lifecycle(ctx context.Context, in instances.Instance, version int) ([]result, error) {
	tmpl, err := r.template(ctx, in.Group)
	if err != nil {
		return nil, err
	}
	state, err := State(version, tmpl.Spec.Template)
	if err != nil {
		return nil, err
	}
	key := SucceededAnnotation(r.o.Errand)
	if r.o.WhenChanged && tmpl.Annotations[key] == state {
		return []result{{Instance: in, Skipped: true}}, nil
	}
	number, err := r.nextRun(ctx, tmpl)
	if err != nil {
		return nil, err
	}
	job := RunJob(tmpl, number, version)
	if err := r.Client.Create(ctx, job); err != nil {
		return nil, fmt.Errorf("creating the errand's Job %s: %w", job.Name, err)
	}
	fmt.Fprintf(r.o.Out, "Running errand '%s' on %s: Job %s (resolved version %d)\n", r.o.Errand, in, job.Name, version)
	res, err := r.follow(ctx, job, in)
	if !r.o.KeepAlive {
		// The pods go with the Job; their output was printed.
		derr := r.Client.Delete(context.WithoutCancel(ctx), job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		err = errors.Join(err, client.IgnoreNotFound(derr))
	} else {
		fmt.Fprintf(r.o.Out, "Keeping Job %s and its pods (--keep-alive)\n", job.Name)
	}
	if err != nil {
		return nil, err
	}
	if res.Exit == 0 && res.Why == "" {
		err = r.recordSuccess(ctx, tmpl, key, state)
	}
	return []result{res}, err
}

// template is the errand group's template Job of its first instance: the
// suspended Job whose pod template carries the group's labels and the
// first AZ's.
func (r *run) template(ctx context.Context, group string) (*batchv1.Job, error) {
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(r.o.Namespace)); err != nil {
		return nil, err
	}
	var found []string
	for i := range jobs.Items {
		j := &jobs.Items[i]
		l := j.Spec.Template.Labels
		if names.LabelValue(l[names.LabelDeployment]) != names.LabelValue(r.o.Deployment) || names.LabelValue(l[names.LabelInstanceGroup]) != names.LabelValue(group) || j.Labels[LabelTemplate] != "" {
			continue
		}
		if !ptr.Deref(j.Spec.Suspend, false) {
			found = append(found, j.Name)
			continue
		}
		if az, ok := l[names.LabelAZIndex]; !ok || az == "1" {
			return j, nil
		}
	}
	if len(found) > 0 {
		return nil, fmt.Errorf("errand group '%s': Job(s) %s are not suspended: an errand's Job is a template that run-errand copies for each run; set spec.suspend: true (as `bosh-injector objects` prints it)", group, strings.Join(found, ", "))
	}
	return nil, fmt.Errorf("errand group '%s' of deployment '%s' has no template Job in namespace %s: apply the suspended Job `bosh-injector objects` prints for it (pod template labels %s, %s, %s=1 with AZs)", group, r.o.Deployment, r.o.Namespace, names.LabelDeployment, names.LabelInstanceGroup, names.LabelAZIndex)
}

// nextRun counts a run on the template and returns its number; the
// update carries the template's resourceVersion, so two concurrent runs
// get two numbers.
func (r *run) nextRun(ctx context.Context, tmpl *batchv1.Job) (int, error) {
	var n int
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
			return err
		}
		n, _ = strconv.Atoi(tmpl.Annotations[AnnotationRuns])
		n++
		if tmpl.Annotations == nil {
			tmpl.Annotations = map[string]string{}
		}
		tmpl.Annotations[AnnotationRuns] = strconv.Itoa(n)
		return r.Client.Update(ctx, tmpl)
	})
	if err != nil {
		return 0, fmt.Errorf("counting the run on template Job %s: %w", tmpl.Name, err)
	}
	return n, nil
}

// recordSuccess records the State of a successful run on obj.
func (r *run) recordSuccess(ctx context.Context, obj client.Object, key, state string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[key] = state
		obj.SetAnnotations(a)
		return r.Client.Update(ctx, obj)
	})
	if err != nil {
		return fmt.Errorf("recording the successful run on %s: %w", obj.GetName(), err)
	}
	return nil
}

// follow streams the output of the run Job's pod until the Job finished,
// and returns how the instance's run ended.
func (r *run) follow(ctx context.Context, job *batchv1.Job, in instances.Instance) (result, error) {
	res := result{Instance: in}
	var streams sync.WaitGroup
	streaming := map[string]bool{}
	said := map[string]bool{}
	say := func(format string, args ...any) {
		if line := fmt.Sprintf(format, args...); !said[line] {
			said[line] = true
			r.out.Line(in.String(), line)
		}
	}
	var pod *corev1.Pod
	for {
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return res, err
		}
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return res, err
		}
		if len(pods.Items) == 0 {
			r.jobWarnings(ctx, job, say)
		}
		for i := range pods.Items {
			pod = &pods.Items[i]
			several := len(pod.Spec.Containers) > 1
			for _, s := range pod.Status.ContainerStatuses {
				if w := s.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
					say("container %s waiting: %s %s", s.Name, w.Reason, w.Message)
				}
				if streaming[pod.Name+"/"+s.Name] || (s.State.Running == nil && s.State.Terminated == nil) {
					continue
				}
				streaming[pod.Name+"/"+s.Name] = true
				prefix := ""
				if r.several {
					prefix = in.String()
				}
				if several {
					prefix = strings.TrimPrefix(prefix+" "+s.Name, " ")
				}
				streams.Go(func() { r.stream(ctx, pod.Namespace, pod.Name, s.Name, prefix, true) })
			}
		}
		if finished(job) {
			break
		}
		select {
		case <-ctx.Done():
			streams.Wait()
			return res, ctx.Err()
		case <-time.After(poll):
		}
	}
	streams.Wait()
	if pod == nil {
		res.Exit, res.Why = 1, jobFailure(job)
		return res, nil
	}
	// An init container that failed (the render of a template, say) is
	// the run's failure: its output says why.
	for _, s := range pod.Status.InitContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			r.stream(ctx, pod.Namespace, pod.Name, s.Name, s.Name, false)
			res.Exit, res.Why = int(t.ExitCode), fmt.Sprintf("init container %s exited %d", s.Name, t.ExitCode)
			return res, nil
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			res.Exit = int(t.ExitCode)
			return res, nil
		}
	}
	if status.JobCondition(job, batchv1.JobFailed) {
		res.Exit, res.Why = 1, jobFailure(job)
	}
	return res, nil
}

// jobWarnings says why a run Job has no pod: the Job controller's Warning
// Events (a webhook's denial, a quota).
func (r *run) jobWarnings(ctx context.Context, job *batchv1.Job, say func(string, ...any)) {
	var events corev1.EventList
	if err := r.Client.List(ctx, &events, client.InNamespace(job.Namespace), client.MatchingFields{"involvedObject.name": job.Name}); err != nil {
		return
	}
	for _, e := range events.Items {
		if e.InvolvedObject.UID == job.UID && e.Type == corev1.EventTypeWarning {
			say("Job %s: %s: %s", job.Name, e.Reason, e.Message)
		}
	}
}

func finished(job *batchv1.Job) bool {
	return status.JobCondition(job, batchv1.JobComplete) || status.JobCondition(job, batchv1.JobFailed)
}

func jobFailure(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("Job %s failed: %s: %s", job.Name, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("Job %s ended without a pod", job.Name)
}

// stream copies a container's log to the output, each line prefixed.
func (r *run) stream(ctx context.Context, namespace, pod, container, prefix string, follow bool) {
	rc, err := r.Kube.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: follow}).Stream(ctx)
	if err != nil {
		r.out.Line(prefix, fmt.Sprintf("(no output of container %s: %v)", container, err))
		return
	}
	defer rc.Close()
	r.out.Copy(prefix, rc)
}

// colocated runs the errand job's bin/run in each instance's running pod,
// all at once, as the director runs a colocated errand on a service
// group's instances.
func (r *run) colocated(ctx context.Context, all []instances.Instance, version func(string) (int, error)) ([]result, error) {
	key := SucceededAnnotation(r.o.Errand)
	type place struct {
		in    instances.Instance
		pod   *corev1.Pod
		owner *appsv1.StatefulSet
		state string
	}
	var places []place
	for _, in := range all {
		v, err := version(in.Group)
		if err != nil {
			return nil, err
		}
		pod, err := r.instancePod(ctx, in)
		if err != nil {
			return nil, err
		}
		if pod == nil {
			fmt.Fprintf(r.o.Out, "Warning: Skipping instance: %s no pod was found\n", in)
			continue
		}
		p := place{in: in, pod: pod}
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "StatefulSet" {
			var sts appsv1.StatefulSet
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, &sts); err == nil {
				p.owner = &sts
				if p.state, err = State(v, sts.Spec.Template); err != nil {
					return nil, err
				}
			}
		}
		places = append(places, p)
	}
	if r.o.WhenChanged && len(places) > 0 && !slices.ContainsFunc(places, func(p place) bool {
		return p.owner == nil || p.owner.Annotations[key] != p.state
	}) {
		var out []result
		for _, p := range places {
			out = append(out, result{Instance: p.in, Skipped: true})
		}
		return out, nil
	}
	results := make([]result, len(places))
	var wg sync.WaitGroup
	for i, p := range places {
		wg.Go(func() { results[i] = r.exec(ctx, p.in, p.pod) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(results, func(res result) bool { return res.Exit != 0 || res.Why != "" }) {
		return results, nil
	}
	recorded := map[string]bool{}
	for _, p := range places {
		if p.owner != nil && !recorded[p.owner.Name] {
			recorded[p.owner.Name] = true
			if err := r.recordSuccess(ctx, p.owner, key, p.state); err != nil {
				return results, err
			}
		}
	}
	return results, nil
}

// instancePod is the running pod of a service group's instance, nil when
// it has none; a pod that is not running is an error, as the director
// refuses stopped instances.
func (r *run) instancePod(ctx context.Context, in instances.Instance) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(r.o.Namespace), client.MatchingLabels{
		names.LabelDeployment:    names.LabelValue(r.o.Deployment),
		names.LabelInstanceGroup: names.LabelValue(in.Group),
		names.LabelInstanceIndex: strconv.Itoa(in.Index),
	}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase != corev1.PodRunning {
			return nil, fmt.Errorf("Instance(s) '%s' is not running (pod %s is %s), unable to run errand", in, p.Name, p.Status.Phase)
		}
		return p, nil
	}
	return nil, nil
}

// JobContainer is the container of pod in which job's files are: the
// job's errand container (an errand job's, which runs nothing else), else
// the first that mounts /var/vcap/jobs/<job> and runs; "" when none does.
func JobContainer(pod *corev1.Pod, job string) string {
	dir := "/var/vcap/jobs/" + job
	found := ""
	for _, c := range pod.Spec.Containers {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir }) {
			continue
		}
		if !podstate.Running(pod, c.Name) {
			continue
		}
		if c.Name == inject.ErrandContainer(job) {
			return c.Name
		}
		if found == "" {
			found = c.Name
		}
	}
	return found
}

// exec runs the errand job's bin/run in the instance's pod through the
// launcher, which runs it as the agent runs it on the instance's VM.
func (r *run) exec(ctx context.Context, in instances.Instance, pod *corev1.Pod) result {
	res := result{Instance: in}
	container := JobContainer(pod, r.o.Errand)
	if container == "" {
		res.Exit, res.Why = 1, fmt.Sprintf("no running container of pod %s has job '%s' (/var/vcap/jobs/%s)", pod.Name, r.o.Errand, r.o.Errand)
		return res
	}
	prefix := ""
	if r.several {
		prefix = in.String()
	}
	stdout, stderr := r.out.Pipe(prefix), r.out.Pipe(prefix)
	err := r.Exec(ctx, pod, container, []string{contract.Binary, contract.Errand, r.o.Errand}, cluster.Streams{Stdout: stdout, Stderr: stderr})
	stdout.Close()
	stderr.Close()
	var exit interface{ ExitStatus() int }
	switch {
	case errors.As(err, &exit):
		res.Exit = exit.ExitStatus()
	case err != nil:
		res.Exit, res.Why = 1, fmt.Sprintf("running bin/run in pod %s, container %s: %v", pod.Name, container, err)
	}
	return res
}

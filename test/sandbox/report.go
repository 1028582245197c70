package sandbox

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
	"github.com/bosh-injector/bosh-injector/test/cluster"
)

// workload is a StatefulSet that `objects` printed, and how many instances
// it runs. An errand's Job is a suspended template, which runs only with
// run-errand (runErrands).
type workload struct {
	Kind, Name string
	Replicas   int
}

// settledRestarts is how many times a process that keeps exiting is
// started again (by the kubelet, or by its launcher in its container)
// before the report gives its failure.
const settledRestarts = 3

// workloads are the StatefulSets among objs.
func workloads(objs []*unstructured.Unstructured) []workload {
	var out []workload
	for _, o := range objs {
		if o.GetKind() != "StatefulSet" {
			continue
		}
		n, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		out = append(out, workload{Kind: o.GetKind(), Name: o.GetName(), Replicas: int(n)})
	}
	return out
}

// instanceReport is how one instance does.
type instanceReport struct {
	// Name is group/index (AZ) once the webhook placed it, else the pod's.
	Name, Pod string
	Injected  bool
	// Rendered: every init container (copy, render) succeeded.
	Rendered bool
	// PreStartFailed: rendered, but a pre-start script failed.
	PreStartFailed bool
	// Running are the containers running (BPM processes); Ended the
	// containers that exited 0.
	Running, Ended []string
	// Failure says what went wrong, with the component's message.
	Failure string
	// Held: the deploy's gate holds the pod and the deploy failed, so it
	// will not start it (as bosh deploy stops at a failing instance).
	Held bool
	// Settled: nothing will change without a change to the objects.
	Settled bool
	// Ports by running container, and the pod's address reaching them
	// from this machine.
	Ports      map[string][]listener
	Address    string
	PortErrors []string
}

// observe reports every instance of ws in namespace ns as it is now.
func (s *Sandbox) observe(ctx context.Context, ws []workload, ports bool) ([]instanceReport, error) {
	var events corev1.EventList
	if err := s.client.List(ctx, &events, client.InNamespace(s.namespace)); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods, client.InNamespace(s.namespace)); err != nil {
		return nil, err
	}
	deployFailed := false
	if s.manifest != "" {
		var secret corev1.Secret
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.manifest}, &secret); err != nil {
			return nil, err
		}
		deployFailed = status.DeployOf(&secret).Phase == status.PhaseFailed
	}
	var out []instanceReport
	for _, w := range ws {
		for i := range w.Replicas {
			pod := podOf(pods.Items, w, i)
			r := instanceReport{Name: fmt.Sprintf("%s %s #%d", w.Kind, w.Name, i)}
			if pod == nil {
				r.Failure, r.Settled = notCreated(events.Items, w)
				if s.gatherFailure != "" {
					r.Failure, r.Settled = "not gathered: the deployment's gathering failed, as a director's deploy would:\n"+s.gatherFailure, true
				}
				out = append(out, r)
				continue
			}
			s.describe(ctx, pod, &r, ports)
			if inject.Gated(pod) && deployFailed {
				r.Held, r.Settled = true, true
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// podOf is instance i of w, the StatefulSet's pod of that ordinal; nil
// while there is none.
func podOf(pods []corev1.Pod, w workload, i int) *corev1.Pod {
	for j := range pods {
		if pods[j].Name == fmt.Sprintf("%s-%d", w.Name, i) {
			return &pods[j]
		}
	}
	return nil
}

// notCreated is why w has no pod: the controller's last FailedCreate
// Event, which carries the webhook's denial.
func notCreated(events []corev1.Event, w workload) (string, bool) {
	var last *corev1.Event
	for i := range events {
		e := &events[i]
		if e.InvolvedObject.Kind == w.Kind && e.InvolvedObject.Name == w.Name && e.Reason == "FailedCreate" &&
			(last == nil || last.LastTimestamp.Before(&e.LastTimestamp)) {
			last = e
		}
	}
	if last == nil {
		return "no pod yet", false
	}
	return "pod not created: " + last.Message, true
}

// describe fills r from pod and the node's view of its containers.
func (s *Sandbox) describe(ctx context.Context, pod *corev1.Pod, r *instanceReport, ports bool) {
	r.Pod = pod.Name
	_, r.Injected = pod.Annotations[names.AnnotationInjected]
	if group, index := pod.Labels[names.LabelInstanceGroup], pod.Labels[names.LabelInstanceIndex]; r.Injected && index != "" {
		r.Name = group + "/" + index
		if az := pod.Labels[names.LabelAZ]; az != "" {
			r.Name += " (" + az + ")"
		}
	} else {
		r.Name = pod.Name
	}
	if !r.Injected {
		r.Failure, r.Settled = "not injected by the webhook (are the pod template's labels right?)", true
		return
	}
	results, _ := cluster.Containers(pod)
	r.Rendered = true
	allEnded := true
	setup := 0
	for _, res := range results {
		switch {
		case res.Ran && res.ExitCode != 0:
			what := "process"
			switch {
			case inject.PreStartContainer(res.Name):
				// The templates rendered: pre-start runs what they gave.
				what, r.PreStartFailed = "pre-start", true
			case res.Init:
				what, r.Rendered = "init container", false
			case inject.SetupContainer(res.Name):
				what, r.Rendered = "setup container", false
			}
			r.Failure = fmt.Sprintf("%s %s exited %d", what, res.Name, res.ExitCode)
			if res.Restarting {
				r.Failure += fmt.Sprintf(" (the kubelet started it again %d times)", res.Restarts)
			}
			if msg := strings.TrimSpace(res.TerminationMessage); msg != "" {
				r.Failure += ":\n" + msg
			}
			// A process started again may still come up (its own address
			// resolving late, say): the report waits for a few restarts.
			r.Settled = !res.Restarting || res.Restarts >= settledRestarts
			return
		case unstartable(res.Waiting):
			r.Failure, r.Settled = fmt.Sprintf("container %s cannot start: %s", res.Name, strings.TrimSpace(res.Waiting)), true
			r.Rendered = r.Rendered && !res.Init
			return
		case res.Init && !res.Ran:
			// Pre-start waiting its turn says nothing of rendering.
			r.Rendered = r.Rendered && inject.PreStartContainer(res.Name)
			return
		case res.Init:
		case inject.SetupContainer(res.Name):
			// Beside the processes, a setup step is done once its
			// container is ready (the last one's probe waits for the
			// whole setup); pre-start's says nothing of rendering.
			if !inject.PreStartContainer(res.Name) {
				r.Rendered = r.Rendered && res.Running && res.Ready
			}
			setup++
		case res.Running:
			r.Running = append(r.Running, res.Name)
			allEnded = false
		case res.Ran:
			r.Ended = append(r.Ended, res.Name)
		default:
			allEnded = false
		}
	}
	ready := !slices.ContainsFunc(results, func(c cluster.Container) bool { return c.Running && !c.Ready })
	r.Settled = allEnded || ready && len(r.Running)+len(r.Ended)+setup == len(pod.Spec.Containers)
	if !ready && s.restartedInPlace(ctx, pod, r) {
		return
	}
	if ports && len(r.Running) > 0 {
		r.Ports, r.Address = map[string][]listener{}, pod.Status.PodIP
		for _, st := range pod.Status.ContainerStatuses {
			if !slices.Contains(r.Running, st.Name) {
				continue
			}
			ls, err := s.listeners(ctx, strings.TrimPrefix(st.ContainerID, "containerd://"))
			if err != nil {
				r.PortErrors = append(r.PortErrors, fmt.Sprintf("%s: %v", st.Name, err))
				continue
			}
			r.Ports[st.Name] = ls
		}
	}
}

// launcherTimeout bounds asking a pod's launchers for their status.
const launcherTimeout = 5 * time.Second

// restartedInPlace says whether a process of pod exited and its launcher
// starts it again in its container, as monit does (the kubelet sees no
// restart), and fills r's failure then: settled once it was started again
// settledRestarts times.
func (s *Sandbox) restartedInPlace(ctx context.Context, pod *corev1.Pod, r *instanceReport) bool {
	if s.launchers == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, launcherTimeout)
	defer cancel()
	st, err := s.launchers(ctx, pod)
	if err != nil {
		return false
	}
	for _, p := range st.Processes {
		if p.State != contract.StateFailing || p.LastExit == nil {
			continue
		}
		r.Running = slices.DeleteFunc(r.Running, func(c string) bool { return c == p.Container })
		how := ""
		if p.LastExit.Signal != "" {
			how = "killed by " + p.LastExit.Signal + "; "
		}
		r.Failure = fmt.Sprintf("process %s exited %d (%sstarted again in its container %d times, as monit does)", p.Container, p.LastExit.Code, how, p.Restarts)
		if tail := strings.TrimSpace(p.LastExit.Tail); tail != "" {
			r.Failure += ":\n" + tail
		}
		r.Settled = p.Restarts >= settledRestarts
		return true
	}
	return false
}

// unstartable says a waiting reason is one the kubelet keeps reporting
// until the pod or image changes.
func unstartable(waiting string) bool {
	for _, reason := range []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"} {
		if strings.HasPrefix(waiting, reason+" ") {
			return true
		}
	}
	return false
}

// printReport writes the report of the instances.
func printReport(out io.Writer, reports []instanceReport) {
	for _, r := range reports {
		state := []string{yes(r.Injected, "injected", "not injected")}
		if r.Injected {
			state = append(state, yes(r.Rendered, "rendered", "not rendered"))
		}
		if r.PreStartFailed {
			state = append(state, "pre-start failed")
		}
		if len(r.Running) > 0 {
			state = append(state, "running: "+strings.Join(r.Running, ", "))
		}
		if len(r.Ended) > 0 {
			state = append(state, "exited 0: "+strings.Join(r.Ended, ", "))
		}
		if r.Held {
			state = append(state, "not started: the deploy stopped before its turn, as bosh deploy does")
		}
		if !r.Settled && r.Failure == "" {
			state = append(state, "still starting")
		}
		what := ""
		if r.Pod != "" && r.Pod != r.Name {
			what += " pod " + r.Pod
		}
		fmt.Fprintf(out, "   %s%s: %s\n", r.Name, what, strings.Join(state, "; "))
		if r.Failure != "" {
			first, rest, _ := strings.Cut(r.Failure, "\n")
			fmt.Fprintf(out, "      FAILED: %s\n", first)
			if rest != "" {
				fmt.Fprintf(out, "%s\n", indentLines(rest, 8))
			}
		}
		for _, c := range slices.Sorted(maps.Keys(r.Ports)) {
			fmt.Fprintf(out, "      %s\n", portLine(c, r.Ports[c], r.Address))
		}
		for _, e := range r.PortErrors {
			fmt.Fprintf(out, "      ports unknown: %s\n", e)
		}
	}
	fmt.Fprintf(out, "   %d of %d instances running\n", running(reports), len(reports))
}

// running counts the instances running their processes without failure.
func running(reports []instanceReport) int {
	n := 0
	for _, r := range reports {
		if r.Failure == "" && len(r.Running) > 0 {
			n++
		}
	}
	return n
}

// portLine says where container c's ports are reached from the host.
func portLine(c string, ls []listener, addr string) string {
	if len(ls) == 0 {
		return c + " listens on no TCP port"
	}
	var parts []string
	for _, l := range ls {
		switch {
		case addr == "":
			parts = append(parts, fmt.Sprintf("%d (the pod has no network: not reachable from the host)", l.Port))
		case l.Loopback && addr != "127.0.0.1":
			parts = append(parts, fmt.Sprintf("%d (on the pod's loopback only)", l.Port))
		default:
			parts = append(parts, fmt.Sprintf("%s:%d", addr, l.Port))
		}
	}
	return c + " listens on " + strings.Join(parts, ", ")
}

func yes(ok bool, y, n string) string {
	if ok {
		return y
	}
	return n
}

func indentLines(text string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(text, "\n", "\n"+pad)
}

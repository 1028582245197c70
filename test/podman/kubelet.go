package podman

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubelet stands in for a node's kubelet: it runs pods the apiserver stored
// under podman and reports how their containers ended back to the pod's
// status, so controllers (the Job controller, bosh-injector's job runner)
// and `kubectl describe pod` see what happened.
type Kubelet struct {
	Client client.Client
	// Dir holds one directory of files per pod (see Env.Dir).
	Dir string
	// Prefix starts the names of the podman pods and volumes it creates.
	Prefix string
	// RegistriesConf is the node's registries.conf (see Env).
	RegistriesConf string
	// Network, when set, gives each pod an address of its own on it; pods
	// with host networking or API access (a kubeconfig or a token) keep
	// the host's.
	Network *Network
	// API, when set, is where pods reach the apiserver with the
	// service-account tokens of their projected token volumes, as on a
	// node; without it such volumes are dropped.
	API *APIServer
}

// Start adapts and plays pod. kubeconfig, when not empty, gives the pod
// access to the apiserver (see Env.Kubeconfig).
func (k *Kubelet) Start(ctx context.Context, pod *corev1.Pod, kubeconfig string) (*Run, error) {
	secrets := map[string]*corev1.Secret{}
	for _, name := range secretNames(pod) {
		var s corev1.Secret
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, &s); err != nil {
			return nil, fmt.Errorf("pod %s/%s: Secret %s: %w", pod.Namespace, pod.Name, name, err)
		}
		secrets[name] = &s
	}
	dir := filepath.Join(k.Dir, pod.Namespace+"_"+pod.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tokens, err := k.tokenVolumes(ctx, pod, dir)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	env := Env{Secrets: secrets, PodIP: "127.0.0.1", Dir: dir, Kubeconfig: kubeconfig, Prefix: k.Prefix + pod.Namespace + "-",
		RegistriesConf: k.RegistriesConf, Tokens: tokens, API: k.API}
	if err := k.Network.join(&env, pod); err != nil {
		return nil, err
	}
	if err := k.bind(ctx, pod); err != nil {
		return nil, err
	}
	if err := k.publishIP(ctx, pod, env.PodIP); err != nil {
		return nil, err
	}
	run, err := Adapt(pod, env)
	if err != nil {
		return nil, err
	}
	if err := run.Play(ctx); err != nil {
		return run, err
	}
	return run, nil
}

// secretNames are the Secrets a pod's volumes and env refer to.
func secretNames(pod *corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			add(v.Secret.SecretName)
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	return out
}

// Report writes results (from Wait) into the status of the pod the run came
// from, as a kubelet would: a phase, and per container its state with exit
// code and termination message (the last lines of its log when it wrote none
// and asked for FallbackToLogsOnError).
func (r *Run) Report(ctx context.Context, c client.Client, results []ContainerResult) error {
	var pod corev1.Pod
	if err := c.Get(ctx, r.source, &pod); err != nil {
		return err
	}
	byName := map[string]ContainerResult{}
	for _, res := range results {
		byName[res.Name] = res
	}
	now := metav1.NewTime(time.Now())
	inits, initsOK := statuses(pod.Spec.InitContainers, byName)
	mains, mainsDone := statuses(pod.Spec.Containers, byName)
	running, waiting, allReady := false, false, true
	for _, s := range mains {
		running = running || s.State.Running != nil
		waiting = waiting || s.State.Waiting != nil
		allReady = allReady && s.Ready
	}
	phase := corev1.PodPending
	switch {
	case !initsOK && pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
		phase = corev1.PodFailed
	case !initsOK:
		// A kubelet would restart the failed init container; the pod stays
		// pending with the failure in its status.
	case running:
		phase = corev1.PodRunning
	case mainsDone:
		phase = corev1.PodSucceeded
	case waiting:
		// Containers still being created: a Failed pod would be replaced
		// by its StatefulSet.
	default:
		phase = corev1.PodFailed
	}
	pod.Status.Phase = phase
	pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses = inits, mains
	pod.Status.PodIP, pod.Status.HostIP = r.podIP, "127.0.0.1"
	pod.Status.PodIPs, pod.Status.HostIPs = []corev1.PodIP{{IP: r.podIP}}, []corev1.HostIP{{IP: "127.0.0.1"}}
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &now
	}
	ready := corev1.ConditionFalse
	if phase == corev1.PodRunning && allReady {
		ready = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: condition(initsOK), LastTransitionTime: now},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	return c.Status().Update(ctx, &pod)
}

func condition(ok bool) corev1.ConditionStatus {
	if ok {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// statuses returns the containers' statuses and whether all of them ended
// successfully.
func statuses(containers []corev1.Container, results map[string]ContainerResult) ([]corev1.ContainerStatus, bool) {
	var out []corev1.ContainerStatus
	ok := true
	for _, c := range containers {
		res := results[c.Name]
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image}
		switch {
		case res.Restarting:
			msg := res.TerminationMessage
			if msg == "" {
				msg = logTail(res.Logs)
			}
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: msg}
			ok = false
		case res.Running:
			s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(res.StartedAt)}
			s.Started, s.Ready = ptr.To(true), res.Ready
			ok = false
		case !res.Ran:
			reason := "PodInitializing"
			if res.Error != "" {
				reason = "CreateContainerError"
			}
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: res.Error}
			ok = false
		default:
			t := &corev1.ContainerStateTerminated{ExitCode: int32(res.ExitCode), Reason: "Completed", Message: res.TerminationMessage,
				StartedAt: metav1.NewTime(res.StartedAt), FinishedAt: metav1.NewTime(res.FinishedAt)}
			if res.ExitCode != 0 {
				t.Reason = "Error"
				ok = false
				if t.Message == "" && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
					t.Message = logTail(res.Logs)
				}
			}
			s.State.Terminated = t
		}
		out = append(out, s)
	}
	return out, ok
}

// logTail is what a kubelet keeps of a log as a termination message: the
// last 80 lines, at most 2048 bytes.
func logTail(logs string) string {
	lines := strings.SplitAfter(strings.TrimRight(logs, "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	tail := strings.Join(lines, "")
	if len(tail) > 2048 {
		tail = tail[len(tail)-2048:]
	}
	return tail
}

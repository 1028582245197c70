// Package day2 is the director's day-2 commands on a deployment the
// operator runs: which instances a spec names (Select), their state as
// `bosh instances` shows it (StateOf, InstancesTable), their logs, their
// variables and events, starting, stopping, restarting and recreating
// them, deleting the deployment (a shell in them is gather/client/ssh).
// The pure parts decide; the Deployment's methods do the I/O with the
// user's credentials.
package day2

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/client/instances"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Instance is one instance of a service group, with its pod (nil when it
// has none).
type Instance struct {
	instances.Instance
	AZ        string
	Bootstrap bool
	Pod       *corev1.Pod
}

// Instances are the deployment's service instances in manifest order as
// the manifest has them (index i of a group over n AZs is in AZ i mod n),
// each with its pod among pods; errand groups have none to show.
func Instances(m *manifest.Manifest, pods []corev1.Pod) []Instance {
	var out []Instance
	for _, g := range m.InstanceGroups {
		if g.Lifecycle == "errand" {
			continue
		}
		for i := range g.Instances {
			in := Instance{Instance: instances.Instance{Group: g.Name, Index: i, ID: instance.ID(m.Name, g.Name, i)}, Bootstrap: i == 0}
			if len(g.AZs) > 0 {
				in.AZ = g.AZs[i%len(g.AZs)]
			}
			for j := range pods {
				p := &pods[j]
				if p.DeletionTimestamp == nil && p.Labels[names.LabelInstanceGroup] == names.LabelValue(g.Name) &&
					p.Labels[names.LabelInstanceIndex] == strconv.Itoa(i) {
					in.Pod = p
				}
			}
			out = append(out, in)
		}
	}
	return out
}

// Select is the instances the filters name, all without filters; a filter
// naming none is the director's error.
func Select(deployment string, all []Instance, filters []instances.Filter) ([]Instance, error) {
	if len(filters) == 0 {
		return all, nil
	}
	plain := make([]instances.Instance, len(all))
	for i, in := range all {
		plain[i] = in.Instance
	}
	var out []Instance
	for _, f := range filters {
		n := len(out)
		for _, in := range all {
			if f.Matches(in.Instance, plain) && !slices.ContainsFunc(out, func(o Instance) bool { return o.ID == in.ID }) {
				out = append(out, in)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("No instances match '%s' in deployment '%s': see `bosh-injector instances -d %s` for its instances", f, deployment, deployment)
		}
	}
	return out, nil
}

// Process is one process of an instance as `bosh instances --ps` shows it.
type Process struct {
	Name, Job, Container, State string
	// Monit: the process comes from the job's monit file.
	Monit bool
}

// State is an instance's process state, its processes', and why it is not
// running.
type State struct {
	ProcessState string
	Processes    []Process
	Reason       string
}

// ProcessContainers are the pod's process containers (each carries its
// plan), in the pod's order.
func ProcessContainers(pod *corev1.Pod) []Process {
	var out []Process
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name != contract.EnvPlan {
				continue
			}
			var p contract.Plan
			if json.Unmarshal([]byte(e.Value), &p) == nil {
				out = append(out, Process{Name: p.Process, Job: p.Job, Container: c.Name, Monit: p.Monit})
			}
		}
	}
	return out
}

// StateOf is the instance's state from its pod and, when it could be read,
// what its launchers recorded (st): a container the kubelet does not run
// overrides what its launcher last wrote. The instance is failing when any
// process is or a post-start failed, starting while any starts, stopped
// when all are, else running: the agent's aggregate of monit's states.
func StateOf(pod *corev1.Pod, st *contract.Status) State {
	if pod == nil {
		return State{ProcessState: contract.StateStarting, Reason: "it has no pod yet"}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return State{ProcessState: contract.StateFailing, Reason: fmt.Sprintf("pod %s is %s", pod.Name, pod.Status.Phase)}
	}
	launcher := map[string]contract.ProcessStatus{}
	if st != nil {
		for _, p := range st.Processes {
			launcher[p.Container] = p
		}
	}
	s := State{}
	for _, p := range ProcessContainers(pod) {
		p.State = containerState(pod, p.Container, launcher[p.Container].State)
		s.Processes = append(s.Processes, p)
	}
	has := func(state string) bool {
		return slices.ContainsFunc(s.Processes, func(p Process) bool { return p.State == state })
	}
	switch {
	case has(contract.StateFailing):
		s.ProcessState = contract.StateFailing
		for _, p := range s.Processes {
			if p.State == contract.StateFailing {
				s.Reason = fmt.Sprintf("process '%s' of job '%s' is failing (pod %s, container %s%s)", p.Name, p.Job, pod.Name, p.Container, exited(launcher[p.Container]))
				break
			}
		}
	case st != nil && len(st.Failed) > 0:
		f := st.Failed[0]
		s.ProcessState, s.Reason = contract.StateFailing, fmt.Sprintf("%s of job '%s' failed: %s", f.Script, f.Job, f.Message)
	case len(s.Processes) == 0 || has(contract.StateStarting):
		s.ProcessState = contract.StateStarting
	case st != nil && len(st.Pending) > 0 && has(contract.StateRunning):
		s.ProcessState, s.Reason = contract.StateStarting, fmt.Sprintf("post-start of job '%s' has not finished", st.Pending[0])
	case !slices.ContainsFunc(s.Processes, func(p Process) bool { return p.State != contract.StateStopped }):
		s.ProcessState = contract.StateStopped
	case has(contract.StateStopped):
		s.ProcessState, s.Reason = contract.StateFailing, "some of its processes are stopped"
	default:
		s.ProcessState = contract.StateRunning
	}
	return s
}

// containerState is a process's state from its container's status and its
// launcher's record ("" when unread).
func containerState(pod *corev1.Pod, container, launcher string) string {
	i := slices.IndexFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == container })
	if i < 0 {
		return contract.StateStarting
	}
	cs := pod.Status.ContainerStatuses[i]
	switch {
	case cs.State.Running != nil && launcher != "":
		return launcher
	case cs.State.Running != nil && cs.Ready:
		return contract.StateRunning
	case cs.State.Running != nil:
		return contract.StateStarting
	case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
		return contract.StateStopped
	case cs.State.Terminated != nil:
		return contract.StateFailing
	case cs.State.Waiting != nil && waitingFailed(cs.State.Waiting.Reason):
		return contract.StateFailing
	}
	return contract.StateStarting
}

// waitingFailed says whether a container waits because it failed, not
// because it is being created.
func waitingFailed(reason string) bool {
	return reason == "CrashLoopBackOff" || strings.HasSuffix(reason, "Error") || strings.Contains(reason, "ImagePull") || reason == "InvalidImageName"
}

// Row is an instance and its state, as the instances table shows it.
type Row struct {
	Instance
	State
}

// InstancesOptions are `instances`' flags.
type InstancesOptions struct {
	Processes, Details, Failing bool
}

// InstancesTable is `bosh instances`' table: a row per instance ("group/
// uuid", process state, AZ, IPs, index, bootstrap; with details the pod as
// the VM and its claims as the disks), with processes a row per process.
// Failing keeps only what is not running.
func InstancesTable(rows []Row, o InstancesOptions) Table {
	t := Table{Content: "instances", Header: []string{"Instance"}}
	if o.Processes {
		t.Header = append(t.Header, "Process")
	}
	t.Header = append(t.Header, "Process State", "AZ", "IPs", "Index", "Bootstrap")
	if o.Details {
		t.Header = append(t.Header, "State", "VM CID", "Disk CIDs", "Agent ID")
	}
	for _, r := range rows {
		if o.Failing && r.ProcessState == contract.StateRunning {
			continue
		}
		row := []string{r.Name()}
		if o.Processes {
			row = append(row, "")
		}
		var ips []string
		var vm, agent string
		var disks []string
		if r.Pod != nil {
			for _, ip := range r.Pod.Status.PodIPs {
				ips = append(ips, ip.IP)
			}
			vm, agent = r.Pod.Name, string(r.Pod.UID)
			for _, v := range r.Pod.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					disks = append(disks, v.PersistentVolumeClaim.ClaimName)
				}
			}
		}
		row = append(row, r.ProcessState, r.AZ, strings.Join(ips, ", "), strconv.Itoa(r.Index), strconv.FormatBool(r.Bootstrap))
		if o.Details {
			row = append(row, desiredState(r.Pod), vm, strings.Join(disks, ", "), agent)
		}
		section := [][]string{row}
		if o.Processes {
			for _, p := range r.Processes {
				if o.Failing && p.State == contract.StateRunning {
					continue
				}
				prow := make([]string, len(t.Header))
				prow[1], prow[2] = p.Name, p.State
				section = append(section, prow)
			}
		}
		t.Sections = append(t.Sections, section)
	}
	return t
}

// desiredState is the director's instance state: started or stopped, as
// its pod's annotation says, detached without a pod.
func desiredState(pod *corev1.Pod) string {
	switch {
	case pod == nil:
		return "detached"
	case pod.Annotations[names.AnnotationDesiredState] == names.DesiredStopped:
		return "stopped"
	}
	return "started"
}

// exited says how a process the launcher starts again in its container
// last exited, and how many times it was started again.
func exited(p contract.ProcessStatus) string {
	if p.LastExit == nil {
		return ""
	}
	return fmt.Sprintf("; exited %d, started again in its container %d times", p.LastExit.Code, p.Restarts)
}

package contract

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// An instance's setup runs in steps before its processes start, as the
// agent applies the jobs and runs their pre-start scripts before monit
// starts anything: render (Rendered), then each pre-start step (named after
// its container). A step marks its end in PlanDir with the pod's boot, so a
// container restarted in the same sandbox finds the step done, while a
// recreated sandbox (a rebooted VM, as the kubelet re-runs init containers
// then) runs it again.

// Rendered is the render step.
const Rendered = "render"

// Addressed is the end of render's wait for the instance's own address to
// resolve to the pod's IP (or of its bound): as on a VM, whose DNS record
// exists before monit starts its jobs, nothing starts before it, while
// pre-start, which waits only for Rendered, runs meanwhile. The pod is not
// ready before it either: the last setup container's probe waits for the
// whole setup.
const Addressed = "address"

// The last setup container answers the pod's readiness probe over HTTP,
// at SetupPath on SetupPort of the pod's IP: monit's port on every BOSH
// VM, which no job can use there. An HTTP probe costs the kubelet a request,
// not a process started in the container; the answer waits for the setup,
// a little less than SetupProbeTimeout seconds.
const (
	SetupPort         = 2822
	SetupPath         = "/setup"
	SetupProbeTimeout = 60
)

// ReadyPath, on SetupPort too, answers a BPM process container's
// readiness probe from the same server: ReadyURL names the container, its
// job and process. The launcher's files in StateDir say how its process
// does, so nothing has to run in the process container each period.
const ReadyPath = "/ready"

// NoWait added to a ReadyURL's query asks for the answer now, without the
// probe's wait for what is still starting: the deploy asks once the watch
// time is over.
const NoWait = "nowait"

// FailedStatus is a ReadyPath answer's status for a failure no waiting
// ends (a job's post-start failed: it is not run again), which fails a
// deploy at once, as the director's does when post-start fails; other
// answers not ready are 503.
const FailedStatus = 500

// ReadyURL is the probe's path and query for a process container.
func ReadyURL(p Plan) string {
	return ReadyPath + "?" + url.Values{"container": {p.Container}, "job": {p.Job}, "process": {p.Process}}.Encode()
}

// ReadyPlan is the Plan a ReadyURL's query names, with the instance's part
// read from dir (PlanDir).
func ReadyPlan(dir string, query url.Values) (Plan, error) {
	p := Plan{Container: query.Get("container"), Job: query.Get("job"), Process: query.Get("process")}
	if p.Container == "" || p.Job == "" || p.Process == "" {
		return p, fmt.Errorf("the query names no container, job and process: %q", query.Encode())
	}
	in, err := loadInstance(dir)
	if err == nil && !slices.Contains(in.Containers, p.Container) {
		err = fmt.Errorf("the instance has no process container %q", p.Container)
	}
	p.Instance = in
	return p, err
}

// stepPoll is how often a waiter looks for a step's mark.
const stepPoll = 20 * time.Millisecond

// Boot identifies the pod's sandbox: the network and IPC namespaces every
// container of a pod shares, and a new sandbox replaces. A process keeps
// its namespaces, so it is read once; waiters ask at every poll.
var Boot = sync.OnceValue(func() string {
	var ids []string
	for _, ns := range []string{"net", "ipc"} {
		id, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			id = ns + ":?"
		}
		ids = append(ids, id)
	}
	return strings.Join(ids, " ")
})

// MarkDone records that step ended in this boot.
func MarkDone(dir, step string) error {
	tmp := filepath.Join(dir, "."+step+".done.tmp")
	if err := os.WriteFile(tmp, []byte(Boot()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, doneFile(dir, step))
}

// Done says whether step ended in this boot.
func Done(dir, step string) bool {
	data, err := os.ReadFile(doneFile(dir, step))
	return err == nil && string(data) == Boot()
}

func doneFile(dir, step string) string { return filepath.Join(dir, step+".done") }

// WaitDone waits until every step ended in this boot; when ctx ends first,
// the error names the step still awaited.
func WaitDone(ctx context.Context, dir string, steps ...string) error {
	for _, step := range steps {
		for !Done(dir, step) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for the %s step of the instance's setup: %w", step, context.Cause(ctx))
			case <-time.After(stepPoll):
			}
		}
	}
	return nil
}

// WaitSetup waits for the instance's whole setup: render, the pre-start
// steps the rendered instance names, and the address wait.
func WaitSetup(ctx context.Context, dir string) error {
	if err := WaitDone(ctx, dir, Rendered); err != nil {
		return err
	}
	in, err := loadInstance(dir)
	if err != nil {
		return err
	}
	return WaitDone(ctx, dir, append(in.PreStarts, Addressed)...)
}

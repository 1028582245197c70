package day2

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bosh-injector/bosh-injector/gather/client/instances"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

const deploymentYAML = `name: shop
instance_groups:
- {name: db, instances: 1, azs: [z1], jobs: [{name: pg, release: r}]}
- {name: api, instances: 3, azs: [z1, z2], jobs: [{name: server, release: r}]}
- {name: smoke, instances: 1, lifecycle: errand, jobs: [{name: smoke, release: r}]}
`

// pod is an injected pod of group/index whose containers have the given
// kubelet states ("running", "ready", "crash", "creating").
func pod(group string, index int, containers map[string]string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: group + "-" + string(rune('0'+index)), UID: types.UID("uid-" + group),
		Labels: map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: group, names.LabelInstanceIndex: string(rune('0' + index))}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0." + string(rune('1'+index))}}}}
	for _, name := range []string{"a-a", "b-b"} {
		state, ok := containers[name]
		if !ok {
			continue
		}
		job, process, _ := strings.Cut(name, "-")
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: name, Env: []corev1.EnvVar{{Name: contract.EnvPlan, Value: contract.Plan{Job: job, Process: process, Container: name}.Encode()}}})
		cs := corev1.ContainerStatus{Name: name}
		switch state {
		case "running":
			cs.State.Running = &corev1.ContainerStateRunning{}
		case "ready":
			cs.State.Running, cs.Ready = &corev1.ContainerStateRunning{}, true
		case "crash":
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		case "creating":
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
	}
	// An errand container carries no plan: it is no process.
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "x-errand"})
	return p
}

func launcherStatus(states ...string) *contract.Status {
	st := &contract.Status{Setup: true}
	for i, s := range states {
		st.Processes = append(st.Processes, contract.ProcessStatus{Container: []string{"a-a", "b-b"}[i], State: s})
	}
	return st
}

func TestStateOfAsTheAgentAggregates(t *testing.T) {
	postStart := launcherStatus("running", "running")
	postStart.Failed = []contract.ScriptFailure{{Job: "a", Script: contract.PostStart, Message: "exit status 3"}}
	pending := launcherStatus("running", "running")
	pending.Pending = []string{"a"}
	again := launcherStatus("running", "failing")
	again.Processes[1].Restarts, again.Processes[1].LastExit = 3, &contract.Exit{Code: 3}
	for _, c := range []struct {
		name       string
		pod        *corev1.Pod
		st         *contract.Status
		want       string
		processes  string
		reasonPart string
	}{
		{name: "no pod", want: "starting", reasonPart: "no pod"},
		{name: "running from the launchers", pod: ptr(pod("api", 0, map[string]string{"a-a": "running", "b-b": "ready"})), st: launcherStatus("running", "running"), want: "running", processes: "running running"},
		{name: "ready without the launchers", pod: ptr(pod("api", 0, map[string]string{"a-a": "ready", "b-b": "ready"})), want: "running", processes: "running running"},
		{name: "crashing container wins over its stale record", pod: ptr(pod("api", 0, map[string]string{"a-a": "ready", "b-b": "crash"})), st: launcherStatus("running", "running"), want: "failing", processes: "running failing", reasonPart: "process 'b' of job 'b'"},
		{name: "started again in its container", pod: ptr(pod("api", 0, map[string]string{"a-a": "ready", "b-b": "running"})), st: again, want: "failing", processes: "running failing", reasonPart: "container b-b; exited 3, started again in its container 3 times)"},
		{name: "post-start failed", pod: ptr(pod("api", 0, map[string]string{"a-a": "running", "b-b": "running"})), st: postStart, want: "failing", processes: "running running", reasonPart: "post-start of job 'a' failed: exit status 3"},
		{name: "post-start pending", pod: ptr(pod("api", 0, map[string]string{"a-a": "running", "b-b": "running"})), st: pending, want: "starting", processes: "running running", reasonPart: "post-start of job 'a' has not finished"},
		{name: "being created", pod: ptr(pod("api", 0, map[string]string{"a-a": "creating", "b-b": "running"})), st: launcherStatus("starting", "starting"), want: "starting", processes: "starting starting"},
		{name: "stopped", pod: ptr(pod("api", 0, map[string]string{"a-a": "running", "b-b": "running"})), st: launcherStatus("stopped", "stopped"), want: "stopped", processes: "stopped stopped"},
		{name: "half stopped", pod: ptr(pod("api", 0, map[string]string{"a-a": "running", "b-b": "running"})), st: launcherStatus("stopped", "running"), want: "failing", processes: "stopped running"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := StateOf(c.pod, c.st)
			var got []string
			for _, p := range s.Processes {
				got = append(got, p.State)
			}
			if s.ProcessState != c.want || strings.Join(got, " ") != c.processes || !strings.Contains(s.Reason, c.reasonPart) {
				t.Errorf("StateOf = %+v, want %s with processes %q and a reason with %q", s, c.want, c.processes, c.reasonPart)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func instancesOf(t *testing.T, pods ...corev1.Pod) []Instance {
	t.Helper()
	m, err := manifest.Parse([]byte(deploymentYAML))
	if err != nil {
		t.Fatal(err)
	}
	return Instances(m, pods)
}

func TestInstancesAndSpecsAsTheDirector(t *testing.T) {
	all := instancesOf(t, pod("api", 1, map[string]string{"a-a": "ready"}))
	var got []string
	for _, in := range all {
		got = append(got, in.Name()+" "+in.AZ)
	}
	want := []string{
		"db/" + instance.ID("shop", "db", 0) + " z1",
		"api/" + instance.ID("shop", "api", 0) + " z1",
		"api/" + instance.ID("shop", "api", 1) + " z2",
		"api/" + instance.ID("shop", "api", 2) + " z1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("instances (errand groups left out):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if all[2].Pod == nil || all[1].Pod != nil || !all[1].Bootstrap || all[2].Bootstrap {
		t.Errorf("pods and bootstrap: %+v", all)
	}
	for spec, n := range map[string]int{"": 4, "api": 3, "api/1": 1, "api/" + instance.ID("shop", "api", 2): 1} {
		filters, err := instances.ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		sel, err := Select("shop", all, filters)
		if err != nil || len(sel) != n {
			t.Errorf("%q selects %d instances (%v), want %d", spec, len(sel), err, n)
		}
	}
	filters, _ := instances.ParseSpec("api/7")
	if _, err := Select("shop", all, filters); err == nil || !strings.Contains(err.Error(), "No instances match 'api/7' in deployment 'shop'") {
		t.Errorf("a spec matching nothing: %v", err)
	}
}

func TestInstancesTableAsBoshPrintsIt(t *testing.T) {
	all := instancesOf(t, pod("db", 0, map[string]string{"a-a": "ready", "b-b": "crash"}), pod("api", 0, map[string]string{"a-a": "ready"}))
	var rows []Row
	for _, in := range all[:2] {
		rows = append(rows, Row{Instance: in, State: StateOf(in.Pod, nil)})
	}
	db, api := "db/"+instance.ID("shop", "db", 0), "api/"+instance.ID("shop", "api", 0)

	var text bytes.Buffer
	if err := InstancesTable(rows, InstancesOptions{Processes: true}).Text(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	if !strings.HasPrefix(lines[0], "Instance") || !strings.Contains(lines[0], "Process State") ||
		!strings.HasPrefix(lines[1], db) || !strings.Contains(lines[1], "failing") ||
		!strings.HasPrefix(lines[2], "~") || !strings.Contains(lines[3], "failing") || !strings.HasPrefix(lines[4], api) ||
		!strings.Contains(text.String(), "\n2 instances\n") {
		t.Errorf("text:\n%s", text.String())
	}

	var out bytes.Buffer
	if err := InstancesTable(rows, InstancesOptions{Failing: true, Details: true}).JSON(&out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tables []struct {
			Content string
			Header  map[string]string
			Rows    []map[string]string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	tbl := doc.Tables[0]
	if tbl.Content != "instances" || tbl.Header["process_state"] != "Process State" || tbl.Header["vm_cid"] != "VM CID" || len(tbl.Rows) != 1 {
		t.Fatalf("json: %s", out.String())
	}
	if r := tbl.Rows[0]; r["instance"] != db || r["process_state"] != "failing" || r["az"] != "z1" || r["ips"] != "10.0.0.1" ||
		r["index"] != "0" || r["bootstrap"] != "true" || r["vm_cid"] != "db-0" || r["agent_id"] != "uid-db" || r["state"] != "started" {
		t.Errorf("--failing --details row: %v", r)
	}
}

func TestLogsNameAsBoshNamesIt(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 4, 5, 123000000, time.UTC)
	for spec, want := range map[string]string{
		"":      "shop-20261126-100405-123.tgz",
		"api":   "shop.api-20261126-100405-123.tgz",
		"api/2": "shop.api.2-20261126-100405-123.tgz",
	} {
		if got := LogsName("shop", spec, now); got != want {
			t.Errorf("LogsName(%q) = %s, want %s", spec, got, want)
		}
	}
}

func TestVariablesAndEventsTables(t *testing.T) {
	var out bytes.Buffer
	if err := VariablesTable([]Variable{{ID: "42", Name: "/ns/shop/db_password", Type: "password"}}).JSON(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"name": "/ns/shop/db_password"`) || !strings.Contains(out.String(), `"type": "password"`) || !strings.Contains(out.String(), `"id": "42"`) {
		t.Errorf("variables json:\n%s", out.String())
	}
	out.Reset()
	if err := EventsTable("shop", []Event{{Action: "create", ObjectType: "vm", ObjectName: "api-z1-0"}}).Text(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Object Type") || !strings.Contains(out.String(), "create") || !strings.Contains(out.String(), "1 events") {
		t.Errorf("events text:\n%s", out.String())
	}
}

// TestOrderAsTheDeploy: the update plan's stages and each group's steps,
// canaries first in the first AZ, then max_in_flight, AZ by AZ, over the
// instances named only.
func TestOrderAsTheDeploy(t *testing.T) {
	m, err := manifest.Parse([]byte(deploymentYAML + `update: {canaries: 1, max_in_flight: 2, canary_watch_time: 1000-5000, update_watch_time: 1000-9000}
`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := update.PlanOf(m.Raw)
	if err != nil {
		t.Fatal(err)
	}
	all := Instances(m, nil)
	azs := map[string][]string{}
	for _, g := range m.InstanceGroups {
		azs[g.Name] = g.AZs
	}
	stages, err := Order(plan, azs, all)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, stage := range stages {
		for _, batches := range stage {
			for _, b := range batches {
				var ins []string
				for _, in := range b.Instances {
					ins = append(ins, fmt.Sprintf("%s/%d", in.Group, in.Index))
				}
				got = append(got, fmt.Sprintf("%s canary=%v watch=%s", strings.Join(ins, ","), b.Canary, b.Watch.Max))
			}
		}
	}
	want := "db/0 canary=true watch=5s | api/0 canary=true watch=5s | api/2 canary=false watch=9s | api/1 canary=false watch=9s"
	if strings.Join(got, " | ") != want {
		t.Errorf("order:\n%s\nwant\n%s", strings.Join(got, " | "), want)
	}
	filters, _ := instances.ParseSpec("api/1")
	one, _ := Select("shop", all, filters)
	if stages, _ := Order(plan, azs, one); len(stages) != 1 || len(stages[0][0]) != 1 || !stages[0][0][0].Canary || stages[0][0][0].Instances[0].Index != 1 {
		t.Errorf("one instance: %+v", stages)
	}
}

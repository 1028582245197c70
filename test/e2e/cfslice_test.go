package e2e_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/gather/render/rendering"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
	"github.com/bosh-injector/bosh-injector/test/cluster"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// TestCFSlice runs what real CF releases ask, unmodified, on the node
// (fixture release cfslice, deployment cfslice): cf-deployment's alias
// naming groups the deployment lacks is gathered with a warning; the BPM
// pre_start hook runs as root with CAP_SETFCAP; the unrestricted volume
// glob over every job's config is admitted and shows the colocated job's
// file; the process, which resolves its own address at start and exits
// when it cannot, starts once; and its peer (as nats-tls's healthcheck and
// route_registrar), which exits until the process listens, is started
// again in its container on monit's next cycle: no container restarts; its
// launcher's status, as `instances` reads it, counts those starts and keeps
// its last exit with the end of its stderr; the instance is Ready, its
// bin/dns/healthy finding the listener's socket as lsof does (doppler's).
func TestCFSlice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)
	const ns = "cfslice"
	gst, err := w.Deploy(ctx, ns, fixtures.Deployment("cfslice", releaseURL))
	if err != nil {
		t.Fatal(err)
	}
	if gst.State != status.ReasonGathered {
		t.Fatalf("gathering: %+v", gst)
	}
	var events corev1.EventList
	if err := w.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, e := range events.Items {
		if e.Reason == gathering.ReasonAliasTargetMissing && e.Type == corev1.EventTypeWarning {
			missing = append(missing, e.Message)
		}
	}
	if got := strings.Join(missing, "\n"); !strings.Contains(got, "target instance group 'windows2019-cell' is not in deployment 'cfslice'") ||
		!strings.Contains(got, "target instance group 'isolated-diego-cell'") {
		t.Errorf("%s warnings:\n%s", gathering.ReasonAliasTargetMissing, got)
	}

	const container = "listener-listener"
	p, err := w.StartInstance(ctx, ns, walkthrough.Instance{Deployment: "cfslice", Group: "nats", AZIndex: 1, Container: container, Image: fixtures.Image(releaseURL, "cfslice")})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := p.WaitForLog(ctx, container, "listening on ", 2*time.Minute)
	results, rerr := w.Report(ctx, p)
	if err != nil || rerr != nil {
		t.Fatalf("%v %v\n%s\ncontainers: %+v", err, rerr, logs, results)
	}
	t.Logf("listener:\n%s", logs)
	for _, want := range []string{"hook: uid 0 with CAP_SETFCAP", "listening on cfslice-nats-0.", "route from job registrar of nats"} {
		if !strings.Contains(logs, want) {
			t.Errorf("listener's log lacks %q:\n%s", want, logs)
		}
	}
	const peer = "healthcheck-healthcheck"
	peerLogs, err := p.WaitForLog(ctx, peer, "healthy: connected to", time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, peerLogs)
	}
	if !strings.Contains(peerLogs, "connecting to cfslice-nats-0.") || !strings.Contains(peerLogs, "starting again on monit's next cycle") {
		t.Errorf("the peer did not exit and start again before the listener listened:\n%s", peerLogs)
	}
	// The listener's bin/dns/healthy finds its socket as lsof does, as
	// doppler's does: the instance is Ready.
	if err := p.WaitReady(ctx, time.Minute); err != nil {
		t.Error(err)
	}
	var pod corev1.Pod
	if err := w.Client.Get(ctx, p.Key(), &pod); err != nil {
		t.Fatal(err)
	}
	st, err := day2.LauncherStatus(ctx, w.UserCluster, &pod)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(st.Processes, func(s contract.ProcessStatus) bool { return s.Container == peer }); i < 0 ||
		st.Processes[i].Restarts < 1 || st.Processes[i].LastExit == nil || st.Processes[i].LastExit.Code == 0 ||
		!strings.Contains(st.Processes[i].LastExit.Tail, "connecting to cfslice-nats-0.") {
		data, _ := json.Marshal(st)
		t.Errorf("the launchers' status does not count the peer's starts with its last exit: %s", data)
	}
	if results, err = w.Report(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Render waited for the instance's address before the setup ended.
	if i := slices.IndexFunc(results, func(r cluster.Container) bool { return r.Name == inject.RenderContainer }); i < 0 || !strings.Contains(results[i].Logs, rendering.AddressResolved) {
		t.Errorf("render did not log %q: %+v", rendering.AddressResolved, results)
	}
	for _, r := range results {
		if r.Restarts > 0 {
			t.Errorf("container %s restarted %d times, its last run's end %s:\n%s", r.Name, r.Restarts, r.LastExit, r.Logs)
		}
	}
}

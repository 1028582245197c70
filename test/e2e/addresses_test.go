package e2e_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// TestAddresses runs two deployments of one namespace on the node: echo
// servers (deployment backend, and group pong of deployment frontend) and
// a client of frontend that connects over TCP to a `*` alias of pong, to each pong
// instance by its `_` alias name <instance id>.<alias>, and to the address
// of the link it consumes from backend. Every name resolves through the
// chart's CoreDNS (the gathered zone) and the cluster DNS (the Services'
// EndpointSlices); the servers' answers prove which instance the bytes
// reached.
func TestAddresses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)

	const ns = "addresses"
	for _, d := range []string{"backend", "frontend"} {
		gst, err := w.Deploy(ctx, ns, fixtures.Deployment(d, releaseURL))
		if err != nil {
			t.Fatal(err)
		}
		if gst.State != status.ReasonGathered {
			t.Fatalf("gathering %s: %+v", d, gst)
		}
	}

	image := fixtures.Image(releaseURL, "echo")
	start := func(deployment, group string, az int, container, wait string) *walkthrough.Pod {
		t.Helper()
		p, err := w.StartInstance(ctx, ns, walkthrough.Instance{Deployment: deployment, Group: group, AZIndex: az, Container: container, Image: image})
		if err != nil {
			t.Fatal(err)
		}
		logs, err := p.WaitForLog(ctx, container, wait, 3*time.Minute)
		results, rerr := w.Report(ctx, p)
		if err != nil || rerr != nil {
			t.Fatalf("%s/%s: %v %v\n%s\ncontainers: %+v", deployment, group, err, rerr, logs, results)
		}
		return p
	}
	const server = "echo-server-echo-server"
	start("backend", "echo", 1, server, "listening on port 7000")
	start("frontend", "pong", 1, server, "listening on port 7000")
	start("frontend", "pong", 2, server, "listening on port 7000")
	client := start("frontend", "client", 1, "echo-client-echo-client", "all targets tried")
	logs, err := client.WaitForLog(ctx, "echo-client-echo-client", "all targets tried", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client:\n%s", logs)

	answers := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\S+) answered (\S+)$`).FindAllStringSubmatch(logs, -1) {
		answers[m[1]] = m[2]
	}
	const uuid = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	// (a) the group alias reaches one of pong's instances.
	if got := answers["pong.service.internal:7000"]; !regexp.MustCompile(`^frontend/pong/` + uuid + `$`).MatchString(got) {
		t.Errorf("`*` alias pong.service.internal answered %q", got)
	}
	// (b) each instance name reaches exactly that instance.
	var ids []string
	for target, got := range answers {
		id, ok := strings.CutSuffix(target, ".pong.service.internal:7000")
		if !ok {
			continue
		}
		ids = append(ids, id)
		if got != "frontend/pong/"+id {
			t.Errorf("`_` alias %s answered %q", target, got)
		}
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 2 {
		t.Errorf("want two instance names of pong, got %v", ids)
	}
	// (c) the link consumed from deployment backend reaches its instance.
	var remote bool
	for target, got := range answers {
		// link().address is the group's Service name in the cluster DNS.
		if strings.HasSuffix(target, "."+ns+".svc.cluster.local:7000") {
			remote = true
			if !regexp.MustCompile(`^backend/echo/` + uuid + `$`).MatchString(got) {
				t.Errorf("backend's link address %s answered %q", target, got)
			}
		}
	}
	if !remote || strings.Contains(logs, "did not answer") {
		t.Errorf("not every target answered:\n%s", logs)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/test/cluster"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// `make demo KEEP=1` as a newcomer runs it: the narration reaches the
// rendered configuration, the render failure and the Events, with
// credentials redacted; the cluster stays up with the chart's pods and the
// injected pod Ready on its one node, for kubectl with the printed
// KUBECONFIG, until `make demo-down` stops it.
func TestDemo(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	err := run(ctx, walkthrough.Options{Out: &out, Keep: true})
	t.Cleanup(func() { _, _ = cluster.Down() })
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"containerd://2.",
		"listen_port: 8080",
		"password: (/bosh-injector/shop/db_password)",
		`"name":"/bosh-injector/shop/db_password","metadata":null,"value":"(/bosh-injector/shop/db_password)"`,
		"Error filling in template 'bus.conf.erb' (line 10: Can't find property '[\"bus.password\"]')",
		"- Unable to render jobs for instance group 'bus'. Errors are:",
		"GatherFailed",
		"Running",
		"Gathered       Secret/shop-manifest",
		"started in order, each scheduled once the one before was Ready: " + strings.Join(walkthrough.FirstDeployPods, ", "),
		"replaced, in order: " + strings.Join(walkthrough.RolloutPods, ", ") + " (5 of 5 instances updated)",
		"'api/2 (rollout-api-z1-1)' is not running after update.",
		"DeployFailed",
		"replaced, in order: " + strings.Join(walkthrough.RolloutPods[1:], ", "),
		"The cluster stays up",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out.String())
		}
	}
	i := strings.LastIndex(out.String(), "KUBECONFIG=")
	if i < 0 {
		t.Fatal("no KUBECONFIG line")
	}
	kubeconfig := strings.TrimSpace(strings.TrimPrefix(out.String()[i:], "KUBECONFIG="))
	bin, err := controlplane.TestbinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) string {
		cmd := exec.Command(filepath.Join(bin, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		data, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, data)
		}
		return string(data)
	}
	if nodes := kubectl("get", "nodes", "--no-headers"); !strings.Contains(nodes, " Ready ") || strings.Count(nodes, "\n") != 1 {
		t.Errorf("nodes: %s", nodes)
	}
	// Every container of the chart's operator and CoreDNS pods and of the
	// injected pod is ready.
	for _, ns := range []string{walkthrough.Namespace, "shop"} {
		pods := kubectl("get", "pods", "--namespace", ns, "--field-selector=status.phase=Running", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[*].ready}{\"\\n\"}{end}")
		if strings.Contains(pods, "false") || strings.TrimSpace(pods) == "" {
			t.Errorf("pods in %s not ready:\n%s", ns, pods)
		}
	}
	if logs := kubectl("logs", "--namespace", "shop", "web-z1-0", "--container", "storefront-storefront"); !strings.Contains(logs, "listen_port: 8080") {
		t.Errorf("kubectl logs: %s", logs)
	}
	if jobs := kubectl("exec", "--namespace", "shop", "web-z1-0", "--container", "storefront-storefront", "--", "ls", "/var/vcap/jobs"); strings.TrimSpace(jobs) != "storefront" {
		t.Errorf("kubectl exec: %s", jobs)
	}

	downed, err := cluster.Down()
	if err != nil || len(downed) != 1 {
		t.Fatalf("demo-down: %v %v", downed, err)
	}
	if _, err := os.Stat(kubeconfig); !os.IsNotExist(err) {
		t.Errorf("the kept cluster's files remain after demo-down: %v", err)
	}
}

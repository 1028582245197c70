package dns_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bosh-injector/bosh-injector/gather/gathering/dns"
	"github.com/bosh-injector/bosh-injector/gather/gathering/services"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/dnsserver"
)

// testbin is the control plane binaries' directory; the test needs only
// etcd and kube-apiserver of it.
func testbin(t *testing.T) string {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("make", "-s", "-C", root, "print-testbin").Output()
		if err != nil {
			t.Fatal(err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("%s not in %s: run `make testbin`", b, dir)
		}
	}
	return dir
}

// TestOnCluster runs the whole chain on a real apiserver: gathering's
// records ConfigMap, the dns-zones sidecar writing it for the chart's
// CoreDNS, and a CoreDNS with the kubernetes plugin standing for the
// cluster DNS, answering the Services from their EndpointSlices. An alias
// resolves to the pods' addresses, and a new version of the records is
// served within seconds.
func TestOnCluster(t *testing.T) {
	bin := testbin(t)
	if _, err := dnsserver.Binary(); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "shop-ns"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// The Services gathering keeps, with the endpoints Kubernetes gives
	// their pods.
	endpoints := func(name string, ips ...string) {
		t.Helper()
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		for _, ip := range ips {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}})
		}
		if err := c.Create(ctx, slice); err != nil {
			t.Fatal(err)
		}
	}
	service := func(name string, ips ...string) {
		t.Helper()
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"x": name}, PublishNotReadyAddresses: true}}
		if err := c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		endpoints(name, ips...)
	}
	service("shop-bus", "10.2.0.10", "10.2.0.11", "10.2.0.12")
	service("shop-bus-1", "10.2.0.11")
	service("shop-db", "10.2.0.20")
	service("shop-db-0", "10.2.0.20")

	d := shop(t, unionOp)
	recs, unions, _, err := dns.Records(d, network, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The Service of the alias over db and web, as gathering keeps it; its
	// endpoints are what Kubernetes gives the pods of both groups, which
	// the webhook labelled with its selector.
	if len(unions) != 1 {
		t.Fatalf("unions %v", unions)
	}
	u := unions[0]
	if err := c.Create(ctx, services.Build(ns, d.Name, services.Desired{Name: u.Service, AliasLabel: u.Label, AliasDomain: u.Domain})); err != nil {
		t.Fatal(err)
	}
	endpoints(u.Service, "10.2.0.20", "10.2.0.30", "10.2.0.31")
	zone := names.DNSZone(d.Name, ns)
	if _, _, err := dns.Write(ctx, c, ns, d.Name, zone, dns.ZoneFile(zone, recs), nil); err != nil {
		t.Fatal(err)
	}

	zones := t.TempDir()
	go func() {
		if err := dns.RunSync(ctx, cfg, dns.SyncOptions{Dir: zones}, logr.Discard()); err != nil && ctx.Err() == nil {
			t.Errorf("dns-zones: %v", err)
		}
	}()

	logs := t.TempDir()
	user, err := env.AddUser(envtest.User{Name: "coredns", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigFile := filepath.Join(logs, "kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	cluster, err := dnsserver.Start(filepath.Join(logs, "cluster.log"), func(port int) (string, error) {
		return fmt.Sprintf(".:%d {\n  kubernetes cluster.local {\n    kubeconfig %s\n  }\n}\n", port, kubeconfigFile), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	srv, err := dnsserver.Start(filepath.Join(logs, "bosh-injector.log"), func(port int) (string, error) {
		return dnsserver.ChartCorefile(port, zones, cluster.Addr)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	r := srv.Resolver()
	await := func(name string, want ...string) {
		t.Helper()
		start := time.Now()
		var got []string
		var err error
		for ctx.Err() == nil {
			got, err = r.LookupHost(ctx, name+"."+zone+".")
			slices.Sort(got)
			if err == nil && slices.Equal(got, want) {
				t.Logf("%s answered after %v", name, time.Since(start).Round(10*time.Millisecond))
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		out, _ := os.ReadFile(filepath.Join(logs, "bosh-injector.log"))
		t.Fatalf("%s: got %v, %v; want %v\n%s", name, got, err, want, out)
	}
	await("bus.service.shop.internal", "10.2.0.10", "10.2.0.11", "10.2.0.12")
	await(d.Groups[0].Instances[1].ID+".bus.service.shop.internal", "10.2.0.11")
	await("db.service.shop.internal", "10.2.0.20")
	// An alias whose `*` targets are db and web: both groups' addresses;
	// `_` targets of bus and db: every instance of both.
	await("store.service.shop.internal", "10.2.0.20", "10.2.0.30", "10.2.0.31")
	await(d.Groups[0].Instances[1].ID+".backend.service.shop.internal", "10.2.0.11")
	await(d.Groups[1].Instances[0].ID+".backend.service.shop.internal", "10.2.0.20")

	// A new version of the records: the sidecar writes it, CoreDNS
	// reloads it.
	more := append(slices.Clone(recs), dns.Record{Name: "new.service.shop.internal", Target: "shop-db." + ns + ".svc.cluster.local."})
	name, created, err := dns.Write(ctx, c, ns, d.Name, zone, dns.ZoneFile(zone, more), nil)
	if err != nil || !created || name != "shop.dns-v2" {
		t.Fatalf("second version: %s %v %v", name, created, err)
	}
	await("new.service.shop.internal", "10.2.0.20")
}

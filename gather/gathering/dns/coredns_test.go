package dns_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/gathering/dns"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/test/dnsserver"
)

// clusterZone stands for the cluster DNS: the addresses of the shop
// deployment's Services in shop-ns, as CoreDNS's kubernetes plugin would
// answer them (a group Service has every instance's address). serial
// must grow for CoreDNS to reload a changed zone.
func clusterZone(t *testing.T, ips map[string][]string, serial int) []byte {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN cluster.local.\n$TTL 5\n@ IN SOA ns.cluster.local. hostmaster.cluster.local. %d 3600 600 86400 5\n@ IN NS ns.cluster.local.\n", serial)
	for _, svc := range slices.Sorted(func(yield func(string) bool) {
		for k := range ips {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, ip := range ips[svc] {
			fmt.Fprintf(&b, "%s.shop-ns.svc IN A %s\n", svc, ip)
		}
	}
	return []byte(b.String())
}

// TestCoreDNS serves the shop deployment's generated zone with the chart's
// Corefile in a real CoreDNS, forwarding to a second CoreDNS standing for the
// cluster DNS, and resolves every alias form bosh-dns would.
func TestCoreDNS(t *testing.T) {
	if _, err := dnsserver.Binary(); err != nil {
		t.Fatal(err)
	}
	ips := map[string][]string{
		"shop-bus":   {"10.1.0.10", "10.1.0.11", "10.1.0.12"},
		"shop-bus-0": {"10.1.0.10"}, "shop-bus-1": {"10.1.0.11"}, "shop-bus-2": {"10.1.0.12"},
		"shop-db": {"10.1.0.20"}, "shop-db-0": {"10.1.0.20"},
		"shop-web": {"10.1.0.30", "10.1.0.31"}, "shop-web-0": {"10.1.0.30"}, "shop-web-1": {"10.1.0.31"},
	}
	logs := t.TempDir()
	clusterDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(clusterDir, "db.cluster.local"), clusterZone(t, ips, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster, err := dnsserver.Start(filepath.Join(logs, "cluster.log"), func(port int) (string, error) {
		return fmt.Sprintf(".:%d {\n  auto {\n    directory %s\n    reload 200ms\n  }\n}\n", port, clusterDir), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()

	d := shop(t)
	recs, _, _, err := dns.Records(d, network, nil)
	if err != nil {
		t.Fatal(err)
	}
	zone := names.DNSZone(d.Name, network.Namespace)
	zones := t.TempDir()
	if err := dns.Sync(zones, map[string][]byte{dns.ZoneFilePrefix + zone: dns.ZoneFile(zone, recs)}); err != nil {
		t.Fatal(err)
	}
	srv, err := dnsserver.Start(filepath.Join(logs, "bosh-injector.log"), func(port int) (string, error) {
		return dnsserver.ChartCorefile(port, zones, cluster.Addr)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	defer func() {
		if t.Failed() {
			out, _ := os.ReadFile(filepath.Join(logs, "bosh-injector.log"))
			t.Logf("CoreDNS log:\n%s", out)
		}
	}()

	bus := d.Groups[0].Instances
	want := map[string][]string{
		// `*`: the group.
		"bus.service.shop.internal": ips["shop-bus"],
		"db.service.shop.internal":  ips["shop-db"],
		// `_`: one name per instance UUID.
		bus[0].ID + ".bus.service.shop.internal": ips["shop-bus-0"],
		bus[2].ID + ".bus.service.shop.internal": ips["shop-bus-2"],
		// A `*` target of a `_.` domain: any name under it is the group.
		"anything.web.service.shop.internal": ips["shop-web"],
		// The director's forms.
		"q-s0.bus.default.shop.bosh":                             ips["shop-bus"],
		bus[1].ID + ".bus.default.shop.bosh":                     ips["shop-bus-1"],
		"0.db.default.shop.bosh":                                 ips["shop-db-0"],
		instance.ID("shop", "web", 1) + ".web.default.shop.bosh": ips["shop-web-1"],
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := srv.Resolver()
	for name, ips := range want {
		got, err := r.LookupHost(ctx, name+"."+zone+".")
		slices.Sort(got)
		if err != nil || !slices.Equal(got, ips) {
			t.Errorf("%s: got %v, %v; want %v", name, got, err, ips)
		}
	}
	// Names outside the zone are the cluster DNS's; unknown names in the
	// zone do not exist.
	if got, err := r.LookupHost(ctx, "shop-db.shop-ns.svc.cluster.local."); err != nil || !slices.Equal(got, ips["shop-db"]) {
		t.Errorf("forwarded name: got %v, %v", got, err)
	}
	_, err = r.LookupHost(ctx, "nothing.service.shop.internal."+zone+".")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("unknown alias: got %v, want not found", err)
	}

	// A name whose instance has no address yet (its pod has no IP) is not
	// found; once the cluster DNS has the address, the name answers at
	// once: the denial was not cached.
	pending := "0.web.default.shop.bosh." + zone + "."
	delete(ips, "shop-web-0")
	if err := os.WriteFile(filepath.Join(clusterDir, "db.cluster.local"), clusterZone(t, ips, 2), 0o644); err != nil {
		t.Fatal(err)
	}
	awaitCluster := func(found bool) {
		t.Helper()
		for {
			_, err := cluster.Resolver().LookupHost(ctx, "shop-web-0.shop-ns.svc.cluster.local.")
			if (err == nil) == found {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("the cluster DNS did not reload: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	awaitCluster(false)
	if _, err := r.LookupHost(ctx, pending); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("an instance without address: got %v, want not found", err)
	}
	ips["shop-web-0"] = []string{"10.1.0.30"}
	if err := os.WriteFile(filepath.Join(clusterDir, "db.cluster.local"), clusterZone(t, ips, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	awaitCluster(true)
	if got, err := r.LookupHost(ctx, pending); err != nil || !slices.Equal(got, ips["shop-web-0"]) {
		t.Errorf("an instance given its address: got %v, %v; the denial was cached", got, err)
	}

	// New records replace the zone within the reload interval.
	more := append(slices.Clone(recs), dns.Record{Name: "new.service.shop.internal", Target: "shop-db.shop-ns.svc.cluster.local."})
	start := time.Now()
	if err := dns.Sync(zones, map[string][]byte{dns.ZoneFilePrefix + zone: dns.ZoneFile(zone, more)}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := r.LookupHost(ctx, "new.service.shop.internal."+zone+".")
		if err == nil && slices.Equal(got, ips["shop-db"]) {
			t.Logf("changed zone served after %v", time.Since(start).Round(10*time.Millisecond))
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("changed zone not served: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

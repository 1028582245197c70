package rendering_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/bosh-injector/bosh-injector/gather/render/rendering"
)

// The wait ends when the name answers with the pod's own IP: not when it
// does not exist yet, nor when it still answers a previous pod's IP.
func TestAwaitAddress(t *testing.T) {
	const addr, ip = "shop-web-0.shop.svc.cluster.local", "10.1.0.7"
	answers := []func() ([]string, error){
		func() ([]string, error) { return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true} },
		func() ([]string, error) { return []string{"10.1.0.3"}, nil },
		func() ([]string, error) { return []string{ip}, nil },
	}
	asked := 0
	lookup := func(_ context.Context, host string) ([]string, error) {
		if host != addr {
			t.Errorf("looked up %s, want %s", host, addr)
		}
		a := answers[min(asked, len(answers)-1)]
		asked++
		return a()
	}
	if _, err := rendering.AwaitAddress(context.Background(), lookup, addr, ip, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if asked != 3 {
		t.Errorf("asked %d times, want 3", asked)
	}

	stale := func(context.Context, string) ([]string, error) { return []string{"10.1.0.3"}, nil }
	waited, err := rendering.AwaitAddress(context.Background(), stale, addr, ip, 600*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not resolve to the pod's IP 10.1.0.7 within 600ms: it resolves to [10.1.0.3]") {
		t.Errorf("a stale answer gave %v", err)
	}
	if waited < 600*time.Millisecond || waited > 5*time.Second {
		t.Errorf("waited %s for a 600ms bound", waited)
	}
}

// Run waits for the instance's own address after rendering; it carries on
// when the name does not resolve in time, saying why, and stops when the
// container is stopped.
func TestRunAwaitsItsAddress(t *testing.T) {
	lines := func(c *rendering.Config) *[]string {
		var got []string
		c.Log = funcr.New(func(prefix, args string) { got = append(got, args) }, funcr.Options{})
		return &got
	}
	own := func(_ context.Context, host string) ([]string, error) {
		if host != "shop-bus-2.shop-ns.svc.cluster.local" {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return []string{"10.1.0.7"}, nil
	}
	c := setup(t, "bus")
	c.Index, c.AddressWait, c.Lookup = 2, 5*time.Second, own
	got := lines(&c)
	if err := rendering.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 1 || !strings.Contains((*got)[0], rendering.AddressResolved) || !strings.Contains((*got)[0], `"address"="shop-bus-2.shop-ns.svc.cluster.local"`) {
		t.Errorf("logged %q", *got)
	}

	missing := func(_ context.Context, host string) ([]string, error) {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	c = setup(t, "bus")
	c.Index, c.AddressWait, c.Lookup = 2, 300*time.Millisecond, missing
	got = lines(&c)
	if err := rendering.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 1 || !strings.Contains((*got)[0], "starting the jobs before their address resolves") || !strings.Contains((*got)[0], "no such host") {
		t.Errorf("logged %q", *got)
	}

	// Without the pod's IP there is nothing to wait for.
	c = setup(t, "bus")
	c.Index, c.AddressWait, c.PodIP = 2, time.Hour, ""
	c.Lookup = func(context.Context, string) ([]string, error) {
		t.Error("looked up an address without the pod's IP")
		return nil, nil
	}
	if err := rendering.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c = setup(t, "bus")
	c.Index, c.AddressWait, c.Lookup = 2, time.Hour, missing
	if err := rendering.Run(ctx, c); err == nil {
		t.Error("a stopped render succeeded")
	}
}

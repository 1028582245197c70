package rendering_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/rendering"
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

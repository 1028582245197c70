package rendering

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// Lookup resolves a host name to its addresses, as net.Resolver.LookupHost.
type Lookup func(ctx context.Context, host string) ([]string, error)

// addressPoll is how often AwaitAddress asks again.
const addressPoll = 250 * time.Millisecond

// AwaitAddress waits until address resolves to ip, the pod's own IP, for at
// most within, and returns how long it waited. On a VM the instance's DNS
// record exists before its jobs start; in a pod the record appears once the
// pod's IP is published, which a job listening on its own spec.address
// (nats-release's nats-tls does) would otherwise race and exit on. An answer
// without ip is a record not yet updated (a previous pod's address).
//
// The error says what the name last resolved to; the caller starts the
// jobs anyway, as the kubelet restarts a process that exits.
func AwaitAddress(ctx context.Context, lookup Lookup, address, ip string, within time.Duration) (time.Duration, error) {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last error
	for {
		addrs, err := lookup(ctx, address)
		switch {
		case err == nil && slices.Contains(addrs, ip):
			return time.Since(start), nil
		case err == nil:
			last = fmt.Errorf("it resolves to %v, not the pod's IP %s", addrs, ip)
		case !errors.Is(err, context.DeadlineExceeded):
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return time.Since(start), fmt.Errorf("the instance's address %s did not resolve to the pod's IP %s within %s: %w", address, ip, within, last)
		case <-time.After(addressPoll):
		}
	}
}

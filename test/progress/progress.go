// Package progress waits as a person watching a cluster waits: as long as
// the cluster keeps doing something (a pod's status or an event changed),
// up to a bound, and gives up once nothing changed for a while. A loaded
// machine then slows a test down instead of failing it; a stuck one fails
// in the time a fixed wait would once the cluster is otherwise quiet, and
// at the latest after Bound such times.
package progress

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Bound is how many idle periods a wait lasts at most, however much the
// cluster does meanwhile.
const Bound = 4

// interval is how often done is asked; the cluster's fingerprint is read
// every fingerprintEvery (a quarter of the idle time when that is shorter).
const (
	interval         = 200 * time.Millisecond
	fingerprintEvery = 2 * time.Second
)

// Until asks done until it says true. It fails when the cluster's
// fingerprint (Of) has not changed for idle, or after Bound idle periods;
// the error says what was waited for and for how long.
func Until(ctx context.Context, c client.Reader, what string, idle time.Duration, done func() (bool, error)) error {
	return UntilChanging(ctx, what, idle, func() string { return Of(ctx, c) }, done)
}

// UntilChanging is Until with the fingerprint given: any change of it
// counts as progress.
func UntilChanging(ctx context.Context, what string, idle time.Duration, fingerprint func() string, done func() (bool, error)) error {
	start := time.Now()
	every := min(fingerprintEvery, idle/4)
	last, lastChange, lastRead := fingerprint(), start, start
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		now := time.Now()
		if now.Sub(lastRead) >= every {
			lastRead = now
			// "" is a fingerprint that could not be read: no news.
			if f := fingerprint(); f != "" && f != last {
				last, lastChange = f, now
			}
		}
		switch {
		case now.Sub(lastChange) >= idle:
			return fmt.Errorf("waiting for %s: not there after %s, the cluster unchanged for the last %s", what, now.Sub(start).Round(time.Second), idle)
		case now.Sub(start) >= Bound*idle:
			return fmt.Errorf("waiting for %s: not there after %s (the cluster still changing)", what, now.Sub(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// Of is a fingerprint of what the cluster is doing: the newest resource
// version among its pods and among its Normal events ("" when they cannot
// be read). Leases and other heartbeats do not count, nor do Warning
// events: a probe failing again and again bumps its event's count, which
// is no progress.
func Of(ctx context.Context, c client.Reader) string {
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	var events corev1.EventList
	if c.List(ctx, pods) != nil || c.List(ctx, &events) != nil {
		return ""
	}
	var podsTop, eventsTop uint64
	for _, o := range pods.Items {
		podsTop = max(podsTop, version(o.ResourceVersion))
	}
	for _, e := range events.Items {
		if e.Type != corev1.EventTypeWarning {
			eventsTop = max(eventsTop, version(e.ResourceVersion))
		}
	}
	return strconv.FormatUint(podsTop, 10) + "/" + strconv.FormatUint(eventsTop, 10)
}

func version(rv string) uint64 {
	v, _ := strconv.ParseUint(rv, 10, 64)
	return v
}

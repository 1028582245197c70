// Package disruption serializes, per instance group, the decisions that
// take an instance of it down: the deploy controller releasing a step and
// the disk controller draining an instance to grow its disk. Each checks
// what the other has down, then acts; two such decisions at once would
// both see the group whole and take down more instances than
// max_in_flight. The operator that runs both controllers (one at a time,
// by leader election) holds the group's lock over each check and act, and
// reads what it checks from the API server.
package disruption

import (
	"sync"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Groups holds a lock per instance group. Its zero value is ready; a nil
// Groups locks nothing (a controller running alone).
type Groups struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Hold takes the lock of a deployment's instance group and returns its
// release.
func (g *Groups) Hold(namespace, deployment, group string) (release func()) {
	if g == nil {
		return func() {}
	}
	key := namespace + "/" + names.LabelValue(deployment) + "/" + names.LabelValue(group)
	g.mu.Lock()
	if g.locks == nil {
		g.locks = map[string]*sync.Mutex{}
	}
	l, ok := g.locks[key]
	if !ok {
		l = &sync.Mutex{}
		g.locks[key] = l
	}
	g.mu.Unlock()
	l.Lock()
	return l.Unlock
}

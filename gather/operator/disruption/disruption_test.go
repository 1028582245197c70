package disruption

import (
	"sync"
	"sync/atomic"
	"testing"
)

// One holder of a group at a time, whatever its name's spelling; other
// groups are not held back.
func TestHold(t *testing.T) {
	var g Groups
	var in, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := "db_store"
			if i%2 == 1 {
				group = "db-store"
			}
			release := g.Hold("ns", "shop", group)
			n := in.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			in.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders of one group at once", most.Load())
	}
	release := g.Hold("ns", "shop", "db")
	g.Hold("ns", "shop", "api")()
	release()
	var none *Groups
	none.Hold("ns", "shop", "db")()
}

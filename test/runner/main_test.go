package main

import (
	"sync"
	"testing"
	"time"
)

// The schedule never runs more clusters at once than the cores (a package
// of more runs alone), nor more other packages than the cores, and runs
// every package once; the others run beside the clusters.
func TestSchedule(t *testing.T) {
	pkgs := []*pkg{
		{ImportPath: "e2e", clusters: 2}, {ImportPath: "demo", clusters: 1}, {ImportPath: "sandbox", clusters: 1},
		{ImportPath: "big", clusters: 3}, {ImportPath: "a"}, {ImportPath: "b"}, {ImportPath: "c"}, {ImportPath: "d"},
	}
	var mu sync.Mutex
	clusters, others, maxOthers := 0, 0, 0
	var besideClusters bool
	ran := map[string]int{}
	results := schedule(pkgs, 2, 2, func(p *pkg) result {
		mu.Lock()
		ran[p.ImportPath]++
		if p.clusters > 0 {
			if clusters > 0 && clusters+p.clusters > 2 {
				t.Errorf("%s started with %d clusters running", p.ImportPath, clusters)
			}
			clusters += p.clusters
		} else {
			others++
			maxOthers = max(maxOthers, others)
			besideClusters = besideClusters || clusters > 0
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		if p.clusters > 0 {
			clusters -= p.clusters
		} else {
			others--
		}
		mu.Unlock()
		return result{pkg: p.ImportPath, ok: true}
	})
	if len(results) != len(pkgs) {
		t.Errorf("%d results for %d packages", len(results), len(pkgs))
	}
	for _, p := range pkgs {
		if ran[p.ImportPath] != 1 {
			t.Errorf("%s ran %d times", p.ImportPath, ran[p.ImportPath])
		}
	}
	if maxOthers > 2 {
		t.Errorf("%d other packages at once on 2 cores", maxOthers)
	}
	if !besideClusters {
		t.Error("no package ran beside a cluster")
	}
}

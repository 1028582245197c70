package releaseimage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
)

// BenchmarkFixtureReleases builds the fixture releases from source with an
// empty compiled package cache, then again with the disk cache warm, then
// as a second machine would: an empty disk cache and the registry cache
// the first build filled; it prints the three side by side.
func BenchmarkFixtureReleases(b *testing.B) {
	for b.Loop() {
		cacheRepo := fmt.Sprintf("%s/bench-%d", env.registry.Addr, time.Now().UnixNano())
		measure := func(cache string) (time.Duration, int32) {
			cfg, engine := config(b, cache, env.tarballs...)
			cfg.CacheRepository = cacheRepo
			start := time.Now()
			if _, err := releaseimage.Run(context.Background(), cfg); err != nil {
				b.Fatal(err)
			}
			return time.Since(start), engine.calls.Load()
		}
		cache := b.TempDir()
		cold, coldN := measure(cache)
		warm, warmN := measure(cache)
		shared, sharedN := measure(b.TempDir())
		fmt.Printf("fixture releases: cold build %v (%d packages compiled) | warm rebuild %v (%d compiled) | %.0fx"+
			" | second machine, registry cache %v (%d compiled) | %.0fx\n",
			cold.Round(time.Millisecond), coldN, warm.Round(time.Millisecond), warmN, float64(cold)/float64(warm),
			shared.Round(time.Millisecond), sharedN, float64(cold)/float64(shared))
		b.ReportMetric(cold.Seconds(), "cold-s")
		b.ReportMetric(warm.Seconds(), "warm-s")
		b.ReportMetric(shared.Seconds(), "registry-s")
	}
}

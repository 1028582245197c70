package releaseimage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
)

// BenchmarkFixtureReleases builds the three fixture releases from source
// with an empty compiled package cache, then again with the cache warm, and
// prints both side by side.
func BenchmarkFixtureReleases(b *testing.B) {
	for b.Loop() {
		cache := b.TempDir()
		measure := func() (time.Duration, int32) {
			cfg, engine := config(b, cache, env.tarballs...)
			start := time.Now()
			if _, err := releaseimage.Run(context.Background(), cfg); err != nil {
				b.Fatal(err)
			}
			return time.Since(start), engine.calls.Load()
		}
		cold, coldN := measure()
		warm, warmN := measure()
		fmt.Printf("fixture releases: cold build %v (%d packages compiled) | warm rebuild %v (%d compiled) | %.0fx\n",
			cold.Round(time.Millisecond), coldN, warm.Round(time.Millisecond), warmN, float64(cold)/float64(warm))
		b.ReportMetric(cold.Seconds(), "cold-s")
		b.ReportMetric(warm.Seconds(), "warm-s")
	}
}

package progress

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A wait lasts while the fingerprint changes, fails once it stops changing
// for the idle time, and fails after Bound idle periods even while it
// changes.
func TestUntilChanging(t *testing.T) {
	ctx := context.Background()
	n := 0
	changing := func() string { n++; return strconv.Itoa(n) }
	still := func() string { return "same" }
	start := time.Now()
	calls := 0
	err := UntilChanging(ctx, "done on the 30th ask", 3*time.Second, changing, func() (bool, error) { calls++; return calls == 30, nil })
	if err != nil || time.Since(start) < 5*time.Second {
		t.Errorf("a changing cluster: %v after %s, want done after ~6 s (beyond the idle time)", err, time.Since(start))
	}
	err = UntilChanging(ctx, "never", time.Second, still, func() (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "unchanged for the last 1s") {
		t.Errorf("an unchanging cluster: %v", err)
	}
	start = time.Now()
	err = UntilChanging(ctx, "never", 1500*time.Millisecond, changing, func() (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "still changing") || time.Since(start) > 8*time.Second {
		t.Errorf("a wait while changing: %v after %s, want the bound of 6 s", err, time.Since(start))
	}
}

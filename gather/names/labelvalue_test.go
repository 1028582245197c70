package names

import (
	"strings"
	"testing"
)

func TestFreeLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"api.canary.1-of-3":   "api.canary.1-of-3",
		"web_batch.2-of-2":    "web_batch.2-of-2",
		"db/x y.batch.1-of-1": "db-x-y.batch.1-of-1",
		".a.":                 "a",
		"é":                   "",
		"":                    "",
	} {
		if got := FreeLabelValue(in); got != want {
			t.Errorf("FreeLabelValue(%q) = %q, want %q", in, got, want)
		}
	}
	if got := FreeLabelValue(strings.Repeat("x", 80) + ".canary.1-of-3"); len(got) != 63 {
		t.Errorf("long value: %d characters, want 63", len(got))
	}
}

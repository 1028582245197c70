package instances

import "testing"

func TestParseFilter(t *testing.T) {
	for _, bad := range []string{"", "/1", "a/b/c"} {
		if _, err := ParseFilter(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

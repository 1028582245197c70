package variables

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGiven: vars files as bosh's -l, later ones winning, then -v pairs
// winning over them; bad input names the file or flag.
func TestGiven(t *testing.T) {
	dir := t.TempDir()
	one, two := filepath.Join(dir, "one.yml"), filepath.Join(dir, "two.yml")
	_ = os.WriteFile(one, []byte("system_domain: one.example.com\napps_domain: apps.example.com\ntls:\n  ca: CA\n"), 0o644)
	_ = os.WriteFile(two, []byte("system_domain: two.example.com\n"), 0o644)
	given, err := Given(context.Background(), []string{one, two}, []string{"apps_domain=v.example.com", "empty="})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"system_domain": "two.example.com", "apps_domain": "v.example.com", "empty": ""} {
		if v, ok, _ := given.Get(name); !ok || v != want {
			t.Errorf("%s = %v, want %q", name, v, want)
		}
	}
	if v, _, _ := given.Get("tls"); v == nil {
		t.Error("tls: the hash is lost")
	}
	for _, c := range []struct {
		files, kvs []string
		want       string
	}{
		{nil, []string{"novalue"}, `--var "novalue": expected NAME=VALUE`},
		{[]string{filepath.Join(dir, "missing.yml")}, nil, "missing.yml"},
	} {
		if _, err := Given(context.Background(), c.files, c.kvs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
	list := filepath.Join(dir, "list.yml")
	_ = os.WriteFile(list, []byte("- a\n"), 0o644)
	if _, err := Given(context.Background(), []string{list}, nil); err == nil || !strings.Contains(err.Error(), "list.yml: expected a hash of variables") {
		t.Errorf("error %v", err)
	}
}

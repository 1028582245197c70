package names

import "testing"

func TestOrdinal(t *testing.T) {
	for name, want := range map[string]int{"d-db-z1-0": 0, "store-d-db-12": 12, "d-db": -1, "0": -1, "d-db-": -1} {
		n, ok := Ordinal(name)
		if (want >= 0) != ok || ok && n != want {
			t.Errorf("Ordinal(%q) = %d, %v; want %d", name, n, ok, want)
		}
	}
	for _, c := range []struct {
		set, name string
		want      int
	}{
		{"d-db", "d-db-3", 3},
		{"store-d-db", "store-d-db-1", 1},
		// Another set whose name starts with set's.
		{"d-db", "d-db-z2-0", -1},
		{"d-db", "d-web-0", -1},
		{"d-db", "d-db--1", -1},
		{"d-db", "d-db-", -1},
	} {
		n, ok := OrdinalIn(c.set, c.name)
		if (c.want >= 0) != ok || ok && n != c.want {
			t.Errorf("OrdinalIn(%q, %q) = %d, %v; want %d", c.set, c.name, n, ok, c.want)
		}
	}
}

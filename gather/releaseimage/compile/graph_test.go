package compile

import (
	"strings"
	"testing"
)

func TestOrder(t *testing.T) {
	pkgs := []Package{
		{Name: "app", Dependencies: []string{"lib", "golang"}},
		{Name: "lib", Dependencies: []string{"golang"}},
		{Name: "golang"},
	}
	got, err := order("r", pkgs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if strings.Join(names, " ") != "golang lib app" {
		t.Errorf("order %v", names)
	}
	byName := map[string]Package{}
	for _, p := range pkgs {
		byName[p.Name] = p
	}
	if c := closure(byName, "app"); strings.Join(c, " ") != "golang lib" {
		t.Errorf("closure of app: %v", c)
	}

	for _, c := range []struct {
		pkgs []Package
		want string
	}{
		{[]Package{{Name: "a", Dependencies: []string{"b"}}, {Name: "b", Dependencies: []string{"c"}}, {Name: "c", Dependencies: []string{"a"}}},
			"release 'r': packages depend on each other in a cycle: a -> b -> c -> a"},
		{[]Package{{Name: "a", Dependencies: []string{"a"}}}, "cycle: a -> a"},
		{[]Package{{Name: "a", Dependencies: []string{"zlib"}}}, "release 'r': package 'a' depends on 'zlib', which the release does not have"},
	} {
		if _, err := order("r", c.pkgs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.pkgs, err, c.want)
		}
	}
}

func TestKey(t *testing.T) {
	c := &Compiler{StemcellID: "sha256:aa"}
	keys := map[string]string{"golang": "k1"}
	p := Package{Name: "app", Fingerprint: "f", Dependencies: []string{"golang"}}
	k := c.key(p, keys)
	if k != c.key(p, keys) {
		t.Fatal("key is not stable")
	}
	for what, other := range map[string]string{
		"fingerprint": c.key(Package{Name: "app", Fingerprint: "g", Dependencies: []string{"golang"}}, keys),
		"dependency":  c.key(p, map[string]string{"golang": "k2"}),
		"stemcell":    (&Compiler{StemcellID: "sha256:bb"}).key(p, keys),
	} {
		if other == k {
			t.Errorf("a changed %s keeps the key", what)
		}
	}
}

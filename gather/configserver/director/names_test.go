package director

import (
	"testing"
)

func TestDirectors(t *testing.T) {
	var d Directors
	d.Default = "bosh-injector"
	if err := d.ParseNamespaceDirectors([]string{"cf=my-bosh", "logs=other_bosh"}); err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]string{"cf": "my-bosh", "logs": "other_bosh", "shop": "bosh-injector"} {
		if got := d.Of(ns); got != want {
			t.Errorf("Of(%q) = %q, want %q", ns, got, want)
		}
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if got := Name(d.Of("cf"), "cf", "uaa_ca"); got != "/my-bosh/cf/uaa_ca" {
		t.Errorf("Name = %q", got)
	}

	for _, bad := range [][]string{{"cf"}, {"=my-bosh"}, {"cf="}} {
		if err := (&Directors{}).ParseNamespaceDirectors(bad); err == nil {
			t.Errorf("ParseNamespaceDirectors(%q): no error", bad)
		}
	}
	for _, bad := range []Directors{
		{Default: ""},
		{Default: "a/b"},
		{Default: "ok", ByNamespace: map[string]string{"cf": "my bosh"}},
		{Default: "ok", ByNamespace: map[string]string{"cf": "other/bosh"}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v): no error", bad)
		}
	}
}

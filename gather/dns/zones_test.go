package dns_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bosh-injector/bosh-injector/gather/dns"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

func records(name, origin, version, zone string) corev1.ConfigMap {
	return corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{names.LabelVersion: version}},
		Data:       map[string]string{names.DNSZoneKey: origin, names.DNSRecordsKey: zone},
	}
}

// The directory holds the latest version of each zone, and only those.
func TestZoneFilesSync(t *testing.T) {
	files := dns.ZoneFiles([]corev1.ConfigMap{
		records("cf.dns-v1", "cf.a.bosh-injector.internal", "1", "old"),
		records("cf.dns-v10", "cf.a.bosh-injector.internal", "10", "new"),
		records("cf.dns-v9", "cf.a.bosh-injector.internal", "9", "older"),
		records("cf.dns-v1", "cf.b.bosh-injector.internal", "1", "b"),
		records("evil.dns-v1", "../etc", "1", "x"),
		records("unversioned", "u.bosh-injector.internal", "", "x"),
	})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db.gone.bosh-injector.internal"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Corefile"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := dns.Sync(dir, files); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	var got []string
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		got = append(got, e.Name()+"="+string(data))
	}
	want := []string{"Corefile=kept", "db.cf.a.bosh-injector.internal=new", "db.cf.b.bosh-injector.internal=b"}
	if !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
}

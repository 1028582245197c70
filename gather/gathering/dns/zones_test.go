package dns_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bosh-injector/bosh-injector/gather/gathering/dns"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

func records(namespace, deployment, version, origin, zone string) corev1.ConfigMap {
	return corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployment + ".dns-v" + version, Namespace: namespace,
			Labels: map[string]string{names.LabelDeployment: deployment, names.LabelVersion: version}},
		Data: map[string]string{names.DNSZoneKey: origin, names.DNSRecordsKey: zone},
	}
}

// The directory holds the latest version of each zone, and only those; a
// ConfigMap serves only its own namespace's zone of its deployment.
func TestZoneFilesSync(t *testing.T) {
	files := dns.ZoneFiles([]corev1.ConfigMap{
		records("a", "cf", "1", "cf.a.bosh-injector.internal", "old"),
		records("a", "cf", "10", "cf.a.bosh-injector.internal", "new"),
		records("a", "cf", "9", "cf.a.bosh-injector.internal", "older"),
		records("b", "cf", "1", "cf.b.bosh-injector.internal", "b"),
		// Namespace b claims a's zone, with a higher version.
		records("b", "cf", "99", "cf.a.bosh-injector.internal", "hijacked"),
		records("b", "evil", "1", "cf.a.bosh-injector.internal", "hijacked"),
		records("b", "evil", "2", "../etc", "x"),
		records("b", "inc", "1", "inc.b.bosh-injector.internal", "$include /var/run/secrets/kubernetes.io/serviceaccount/token\n"),
		records("a", "unversioned", "", "unversioned.a.bosh-injector.internal", "x"),
		records("", "cf", "100", "cf.a.bosh-injector.internal", "no namespace"),
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

package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestObjects prints the golden output of the objects package, warnings on
// stderr, and with --output writes one file per object.
func TestObjects(t *testing.T) {
	shop := filepath.Join(fixtures, "deployments", "shop.yml")
	code, out, errOut := run("objects", "--manifest", shop, "--namespace", "shop")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden, err := os.ReadFile(filepath.Join("..", "..", "..", "gather", "gathering", "objects", "testdata", "shop.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var warnings, stream []string
	for _, l := range strings.SplitAfter(string(golden), "\n") {
		if w, ok := strings.CutPrefix(l, "# warning: "); ok {
			warnings = append(warnings, "Warning: "+w)
		} else {
			stream = append(stream, l)
		}
	}
	if out != strings.Join(stream, "") {
		t.Errorf("stdout is not the golden stream:\n%s", out)
	}
	if errOut != strings.Join(warnings, "") {
		t.Errorf("stderr %q, want the golden warnings", errOut)
	}

	dir := filepath.Join(t.TempDir(), "objects")
	if code, _, errOut := run("objects", "--manifest", shop, "--ops-file", filepath.Join(fixtures, "deployments", "ops", "scale-web.yml"), "--output", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if e.Name() != renderMarker {
			files = append(files, e.Name())
		}
	}
	want := []string{"job-shop-smoke-tests-z1.yaml", "poddisruptionbudget-shop-bus.yaml", "poddisruptionbudget-shop-db.yaml", "poddisruptionbudget-shop-web.yaml", "secret-shop-manifest.yaml", "statefulset-shop-bus-z1.yaml", "statefulset-shop-bus-z2.yaml",
		"statefulset-shop-db-z1.yaml", "statefulset-shop-web-z1.yaml", "statefulset-shop-web-z2.yaml"}
	if !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
}

func TestObjectsFlagErrors(t *testing.T) {
	shop := filepath.Join(fixtures, "deployments", "shop.yml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--manifest is required"},
		{[]string{"--manifest", shop, "--storage-class-map", "fast"}, `--storage-class-map "fast": expected TYPE=CLASS`},
		{[]string{"--manifest", shop, "--disk-size", "fast=lots"}, "--disk-size fast=lots: quantities must match"},
		{[]string{"--manifest", shop, "--az-zone", "z1"}, `--az-zone "z1": expected AZ=ZONE`},
	} {
		code, _, errOut := run(append([]string{"objects"}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errOut, c.want)
		}
	}
}

// TestObjectsNamesContainersFromBPM: with --release the container is the
// first BPM process's, whatever its name.
func TestObjectsNamesContainersFromBPM(t *testing.T) {
	shopRelease := filepath.Join(t.TempDir(), "shop")
	if err := os.CopyFS(shopRelease, os.DirFS(filepath.Join(fixtures, "releases", "shop"))); err != nil {
		t.Fatal(err)
	}
	bpmFile := filepath.Join(shopRelease, "jobs", "storefront", "templates", "bpm.yml.erb")
	data, err := os.ReadFile(bpmFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bpmFile, []byte(strings.Replace(string(data), "- name: storefront", "- name: server", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// web-check comes first in web, but its monit checks no process: the
	// instance does not start its BPM process, and storefront names the
	// container.
	manifest, err := os.ReadFile(filepath.Join(fixtures, "deployments", "shop.yml"))
	if err != nil {
		t.Fatal(err)
	}
	webCheck := "  - name: web-check\n    release: shop\n"
	reordered := strings.Replace(strings.Replace(string(manifest), webCheck, "", 1), "  jobs:\n  - name: storefront\n", "  jobs:\n"+webCheck+"  - name: storefront\n", 1)
	if reordered == string(manifest) {
		t.Fatal("shop.yml has no web-check job after storefront")
	}
	shopFile := filepath.Join(t.TempDir(), "shop.yml")
	if err := os.WriteFile(shopFile, []byte(reordered), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"objects", "--manifest", shopFile}, shopReleases[:4]...)
	code, out, errOut := run(append(args, "--release", "shop="+shopRelease)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"name: storefront-server", "name: bus-bus", "name: pgstore-pgstore", "name: smoke-tests-smoke-tests"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "storefront-storefront") || strings.Contains(out, "web-check-web-check") {
		t.Error("output names the container storefront-storefront or web-check-web-check")
	}
}

// TestObjectsZones: --az-zone renames an AZ's zone, --no-zone-affinity
// requires none.
func TestObjectsZones(t *testing.T) {
	shop := filepath.Join(fixtures, "deployments", "shop.yml")
	code, out, errOut := run("objects", "--manifest", shop, "--az-zone", "z2=eu-west-1b")
	if code != 0 || !strings.Contains(out, "- eu-west-1b\n") || strings.Contains(out, "- z2\n") || !strings.Contains(out, "- z1\n") {
		t.Errorf("--az-zone: exit %d, %s\n%s", code, errOut, out)
	}
	code, out, errOut = run("objects", "--manifest", shop, "--no-zone-affinity")
	if code != 0 || strings.Contains(out, "topology.kubernetes.io/zone") || !strings.Contains(out, "kind: PodDisruptionBudget") {
		t.Errorf("--no-zone-affinity: exit %d, %s\n%s", code, errOut, out)
	}
}

package app

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const (
	fixtures = "../../../test/fixtures"
	golden   = "../../../test/golden/template"
)

// templateShop renders the fixture deployment with the golden vars store
// (copied, so nothing is generated into the repository).
func templateShop(t *testing.T, output string, extra ...string) (int, string) {
	t.Helper()
	store := filepath.Join(t.TempDir(), "vars-store.yml")
	data, err := os.ReadFile(filepath.Join(golden, "vars-store.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"template",
		"--manifest", filepath.Join(fixtures, "deployments", "shop.yml"),
		"--release", "bus=" + filepath.Join(fixtures, "releases", "bus"),
		"--release", "store=" + filepath.Join(fixtures, "releases", "store"),
		"--release", "shop=" + filepath.Join(fixtures, "releases", "shop"),
		"--vars-store", store, "--namespace", "shop-ns", "--ip", "10.1.0.7", "--output", output}, extra...)
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String() + errOut.String()
}

// tree maps every file under root to whether it is executable and its
// content (git keeps only the executable bit of the golden files' modes).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, _ := d.Info()
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[rel] = fmt.Sprintf("executable %t\n%s", info.Mode()&0o100 != 0, data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// privateModes fails on anything under root that other users may read:
// rendered templates hold properties and credentials.
func privateModes(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err == nil && info.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s: mode %v is open to other users", p, info.Mode())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTemplateGolden(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	if code, msg := templateShop(t, out); code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	want := filepath.Join(golden, "shop")
	if *update {
		if err := os.RemoveAll(want); err != nil {
			t.Fatal(err)
		}
		// Copied with the modes BOSH sets, which the golden records too.
		err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, _ := d.Info()
			rel, _ := filepath.Rel(out, p)
			data, err := os.ReadFile(p)
			if err == nil {
				err = os.MkdirAll(filepath.Dir(filepath.Join(want, rel)), 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(want, rel), data, info.Mode())
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	privateModes(t, out)
	got, exp := tree(t, out), tree(t, want)
	for rel, content := range exp {
		if got[rel] != content {
			t.Errorf("%s differs from the golden (go test ./cmd/... -update)\n%s", rel, got[rel])
		}
	}
	for rel := range got {
		if _, ok := exp[rel]; !ok {
			t.Errorf("%s is not in the golden", rel)
		}
	}
}

func TestTemplateErrorsLeaveOutputAlone(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	if code, msg := templateShop(t, out); code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	before := tree(t, out)
	code, msg := templateShop(t, out, "--var", "session_secret=x", "--ops-file", writeOps(t))
	if code != 1 || !strings.Contains(msg, "Failed to resolve links from deployment 'shop'") {
		t.Fatalf("exit %d: %s", code, msg)
	}
	if !maps.Equal(tree(t, out), before) {
		t.Fatal("a failed run must leave the previous render as it was")
	}
	// A render replaces a previous one of its own.
	if code, msg := templateShop(t, out); code != 0 {
		t.Fatalf("rendering again: exit %d: %s", code, msg)
	}
	if !maps.Equal(tree(t, out), before) {
		t.Fatal("rendering again must give the same tree")
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".template-*")); len(matches) > 0 {
		t.Fatalf("left behind: %v", matches)
	}
}

// writeOps removes the database group, so the web job's required link has
// no provider.
func writeOps(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ops.yml")
	if err := os.WriteFile(p, []byte("- type: remove\n  path: /instance_groups/name=db\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

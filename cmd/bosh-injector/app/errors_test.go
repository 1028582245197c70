package app

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

func run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeManifest(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.yml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var shopReleases = []string{
	"--release", "bus=" + filepath.Join(fixtures, "releases", "bus"),
	"--release", "store=" + filepath.Join(fixtures, "releases", "store"),
	"--release", "shop=" + filepath.Join(fixtures, "releases", "shop"),
}

// TestTemplateErrors: each failure names the flag, key, directory or
// variable at fault, exits 1 and writes nothing.
func TestTemplateErrors(t *testing.T) {
	shop := filepath.Join(fixtures, "deployments", "shop.yml")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown group", []string{"--manifest", shop, "--instance-group", "nope"},
			"--instance-group 'nope': deployment 'shop' has no such instance group; its instance groups are bus, db, web, smoke-tests"},
		{"index beyond the group", []string{"--manifest", shop, "--instance-group", "web", "--index", "2"},
			"--index 2: instance group 'web' has 2 instances, indexes 0 to 1"},
		{"index beyond every group", []string{"--manifest", shop, "--index", "7"},
			"--index 7: no instance group has that many instances; the largest, 'bus', has 3, indexes 0 to 2"},
		{"no instance groups", []string{"--manifest", writeManifest(t, "name: empty\n")},
			"no instance groups: the key 'instance_groups' is missing or empty"},
		{"instance_group typo", []string{"--manifest", writeManifest(t, "name: typo\ninstance_group:\n- {name: web, instances: 1, jobs: []}\n")},
			"no instance groups: the manifest has key 'instance_group'; did you mean 'instance_groups'?"},
		{"zero instances", []string{"--manifest", writeManifest(t, "name: zero\nreleases: [{name: r, version: '1'}]\ninstance_groups:\n- {name: web, instances: 0, jobs: [{name: j, release: r}]}\n")},
			"every instance group has 0 instances: nothing to render"},
		{"release without a directory", []string{"--manifest", shop},
			"no directory given for release 'bus': add --release bus=DIR, a release source tree (DIR/jobs/bus/spec) or a jobs directory (DIR/bus/job.MF)"},
		{"job missing from the release tree", []string{"--manifest", shop, "--release", "bus=" + filepath.Join(fixtures, "releases", "store"),
			"--release", "store=" + filepath.Join(fixtures, "releases", "store"), "--release", "shop=" + filepath.Join(fixtures, "releases", "shop")},
			"job 'bus' not found in release 'bus': no " + filepath.Join(fixtures, "releases", "store", "jobs", "bus", "spec") + "; check --release bus=DIR"},
		{"job missing from a jobs directory", append([]string{"--manifest", shop, "--release", "bus=" + t.TempDir()}, shopReleases[2:]...),
			"job 'bus' not found in release 'bus': no "},
		{"variable given nowhere", append([]string{"--manifest", writeManifest(t, "name: v\nreleases: [{name: shop, version: '1'}]\ninstance_groups:\n- {name: web, instances: 1, jobs: [{name: storefront, release: shop}], env: {x: ((nowhere))}}\n")}, shopReleases...),
			"Failed to find variable 'nowhere' from --var, --vars-file or --vars-store"},
	} {
		t.Run(c.name, func(t *testing.T) {
			output := filepath.Join(t.TempDir(), "out")
			code, out, errOut := run(append([]string{"template", "--output", output}, c.args...)...)
			if code != 1 {
				t.Fatalf("exit %d, want 1: %s%s", code, out, errOut)
			}
			if !strings.Contains(out+errOut, c.want) {
				t.Fatalf("output does not say %q:\n%s%s", c.want, out, errOut)
			}
			if strings.Contains(out+errOut, "config server") || strings.Contains(out+errOut, "undefined method") {
				t.Fatalf("output speaks of a config server or crashed in Ruby:\n%s%s", out, errOut)
			}
			if _, err := os.Stat(output); !os.IsNotExist(err) {
				t.Fatalf("%s was written", output)
			}
		})
	}
}

func TestTemplateWithoutVarsStoreWarnsAndSummarizes(t *testing.T) {
	output := filepath.Join(t.TempDir(), "out")
	args := append([]string{"template", "--manifest", filepath.Join(fixtures, "deployments", "shop.yml"), "--output", output,
		"--instance-group", "web", "--index", "1"}, shopReleases...)
	code, out, errOut := run(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if want := "Warning: no --vars-store: credentials generated for this render (variables: bus_password, db_password, session_secret, bus_ca, bus_tls) are discarded"; !strings.Contains(errOut, want) {
		t.Errorf("stderr does not warn %q:\n%s", want, errOut)
	}
	if want := "Rendered 1 instance group, 1 instance, "; !strings.HasPrefix(out, want) || !strings.HasSuffix(out, " files into "+output+"\n") {
		t.Errorf("stdout %q is not the one-line summary", out)
	}
}

func TestSummaryCountsEverything(t *testing.T) {
	output := filepath.Join(t.TempDir(), "out")
	code, msg := templateShop(t, output)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	rendered := tree(t, output)
	delete(rendered, renderMarker)
	files := len(rendered)
	if want := "Rendered 4 instance groups, 7 instances, " + plural(files, "file") + " into " + output + "\n"; msg != want {
		t.Errorf("output %q, want %q", msg, want)
	}
}

func TestUnknownLogLevelRejected(t *testing.T) {
	code, out, errOut := run("--log-level", "verbose", "version")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if want := `--log-level: want one of debug, info, warn, error, got "verbose"`; !strings.Contains(errOut, want) {
		t.Fatalf("stderr %q does not say %q", errOut, want)
	}
}

func TestVersionPrintsTheCommit(t *testing.T) {
	defer func(c string) { commit = c }(commit)
	commit = "0123abcd"
	code, out, _ := run("version")
	if code != 0 || !strings.Contains(out, "(commit 0123abcd, go") {
		t.Fatalf("exit %d, %q", code, out)
	}
}

// TestGatherExitCode: bad input fails the gathering Job at once, an API or
// network error is retried.
func TestGatherExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{errors.New("- Unable to render jobs for instance group 'web'. Errors are:"), status.ExitInvalidInput},
		{fmt.Errorf("reading manifest Secret ns/m: %w", apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "m")), status.ExitInvalidInput},
		{fmt.Errorf("storing variable 'x': %w", apierrors.NewServiceUnavailable("etcd")), status.ExitTransient},
		{fmt.Errorf("listing: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), status.ExitTransient},
		{fmt.Errorf("reading the jobs: %w", &fs.PathError{Op: "open", Path: "job.MF", Err: syscall.ENOENT}), status.ExitInvalidInput},
	} {
		if got := gatherExitCode(c.err); got != c.want {
			t.Errorf("%v: exit code %d, want %d", c.err, got, c.want)
		}
	}
}

package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// readmeNamespace stands in for the README's `shop` namespace: the shared
// cluster's `shop` holds the walkthrough's deployment.
const readmeNamespace = "readme"

// TestREADME runs the commands of the README's "On your cluster" (from its
// own sh blocks, through Running errands) as written, on the shared
// cluster: only the registry, the operator image's name and the namespace
// are substituted. A command that fails fails the test. Between commands
// it waits for what the README says happens (gathered, deployed, failed)
// and checks it. The harness stands in for what the shared cluster already
// did or this machine cannot do: `make image` tags the image the tests run,
// `make build` links the binary the test built, `podman pull` of an image
// present does nothing (no registry is reachable), and `helm install` is
// the walkthrough's own install of the chart, checked to be the README's.
func TestREADME(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, _, _ := startWalkthrough(t)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands := clusterPath(string(readme))
	if len(commands) < 20 {
		t.Fatalf("found %d commands in the README's cluster path:\n%s", len(commands), strings.Join(commands, "\n"))
	}

	// The README's working directory: a clone's test/ and charts/.
	dir := t.TempDir()
	for _, d := range []string{"test", "charts"} {
		if err := os.Symlink(filepath.Join(root, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	binary, err := walkthrough.BuildBinary(filepath.Join(dir, "built"))
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's registry is plain HTTP: declared to podman as the
	// README says.
	registries := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(registries, fmt.Appendf(nil, "[[registry]]\nlocation = %q\ninsecure = true\n", w.Registry()), 0o644); err != nil {
		t.Fatal(err)
	}
	helmHome := filepath.Join(dir, "helm")
	fixtures.PodmanEnv()
	env := append(os.Environ(), "KUBECONFIG="+w.Kubeconfig, "CONTAINERS_REGISTRIES_CONF="+registries,
		"PATH="+filepath.Join(dir, "bin")+":"+bins+":"+os.Getenv("PATH"),
		"HELM_CACHE_HOME="+helmHome, "HELM_CONFIG_HOME="+helmHome, "HELM_DATA_HOME="+helmHome,
		"README_ROOT="+root, "README_BINARY="+binary, "README_OPERATOR_IMAGE="+walkthrough.OperatorImage)
	const harness = `set -euo pipefail
make() {
	case "$1" in
	image) podman tag "$README_OPERATOR_IMAGE" "${2#IMAGE=}" && echo "${2#IMAGE=}" >> tagged ;;
	build) mkdir -p bin && ln -sf "$README_BINARY" bin/bosh-injector ;;
	example-releases) command make -s -C "$README_ROOT" example-releases EXAMPLE_DIR="$PWD/example" ;;
	*) echo "make $*: not a step of the README's cluster path" >&2; return 2 ;;
	esac
}
podman() {
	if [ "$1" = pull ] && command podman image exists "$2"; then return 0; fi
	command podman "$@"
}
`
	// Its instances stop; the cluster is shared with the tests after it.
	t.Cleanup(func() {
		if err := w.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: readmeNamespace}}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", readmeNamespace, err)
		}
	})
	// The tags `make image` added go again: podman's storage is the machine's.
	t.Cleanup(func() {
		tagged, _ := os.ReadFile(filepath.Join(dir, "tagged"))
		for _, tag := range strings.Fields(string(tagged)) {
			if out, err := fixtures.Podman(ctx, "untag", walkthrough.OperatorImage, tag).CombinedOutput(); err != nil {
				t.Logf("podman untag %s: %v: %s", tag, err, out)
			}
		}
	})
	run := func(command string) string {
		t.Helper()
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, "bash", "-c", harness+command)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		t.Logf("$ %s  (%s)\n%s", command, time.Since(start).Round(100*time.Millisecond), out)
		if err != nil {
			t.Fatalf("the README's command failed: %s: %v\n%s", command, err, out)
		}
		return string(out)
	}
	manifest := func() (*corev1.Secret, error) {
		var s corev1.Secret
		err := w.Client.Get(ctx, client.ObjectKey{Namespace: readmeNamespace, Name: "shop-manifest"}, &s)
		return &s, err
	}
	// waitFor waits until the manifest Secret's labels say state (and
	// deployState, when set).
	waitFor := func(what, state, deployState string) {
		t.Helper()
		start := time.Now()
		var s *corev1.Secret
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 4*time.Minute, true, func(context.Context) (bool, error) {
			s, err = manifest()
			return err == nil && s.Labels[names.LabelState] == state && (deployState == "" || s.Labels[names.LabelDeployState] == deployState), nil
		})
		if err != nil {
			t.Fatalf("%s: %v; the manifest Secret's labels %v, status %s", what, err, s.Labels, s.Annotations[names.AnnotationStatus])
		}
		t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
	}

	namespace := regexp.MustCompile(`(-n|namespace) shop\b`)
	applied := 0
	for _, c := range commands {
		c = strings.ReplaceAll(c, "registry.example.com/me", w.Registry())
		c = namespace.ReplaceAllString(c, "$1 "+readmeNamespace)
		if strings.HasPrefix(c, "helm install ") {
			checkHelmInstall(t, c)
			continue
		}
		out := run(c)
		switch {
		case strings.Contains(c, "run-errand"):
			if strings.Contains(out, "Ambiguous request") {
				t.Errorf("%s warns:\n%s", c, out)
			}
		case strings.Contains(c, "| kubectl apply") && strings.Contains(c, "missing-bus-password"):
			waitFor("the broken ops file's gathering failed", "Failed", "")
			s, err := manifest()
			if err != nil {
				t.Fatal(err)
			}
			if want := `Can't find property '[\"bus.password\"]'`; !strings.Contains(s.Annotations[names.AnnotationStatus], want) {
				t.Errorf("status %s, want the error %s", s.Annotations[names.AnnotationStatus], want)
			}
		case strings.Contains(c, "| kubectl apply"):
			applied++
			waitFor(fmt.Sprintf("apply %d gathered and deployed", applied), "Gathered", "Deployed")
			checkSecretKeys(t, dir, manifest)
			// Applied again unchanged, nothing changes.
			for _, line := range strings.Split(strings.TrimSpace(run(c)), "\n") {
				if !fixtures.AppliedUnchanged(line) {
					t.Errorf("applied again unchanged: %s", line)
				}
			}
		}
	}
	if applied != 2 {
		t.Errorf("the README applied the deployment %d times without the broken ops file, want 2 (before and after it)", applied)
	}
}

// clusterPath are the commands of the README's sh blocks from "On your
// cluster" to "Concepts", a continued line joined.
func clusterPath(readme string) []string {
	start := strings.Index(readme, "\n## On your cluster\n")
	end := strings.Index(readme, "\n## Concepts\n")
	if start < 0 || end < start {
		return nil
	}
	var commands []string
	in, cont := false, false
	for _, line := range strings.Split(readme[start:end], "\n") {
		switch {
		case line == "```sh":
			in = true
		case line == "```":
			in = false
		case in && cont:
			commands[len(commands)-1] += " " + strings.TrimSpace(strings.TrimSuffix(line, `\`))
			cont = strings.HasSuffix(line, `\`)
		case in && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#"):
			commands = append(commands, strings.TrimSpace(strings.TrimSuffix(line, `\`)))
			cont = strings.HasSuffix(line, `\`)
		}
	}
	return commands
}

// checkHelmInstall checks that the README installs the chart as the
// shared walkthrough did: the same release, chart and namespace, and only
// the image values the walkthrough sets to its own images.
func checkHelmInstall(t *testing.T, c string) {
	t.Helper()
	fields := strings.Fields(strings.SplitN(c, "#", 2)[0])
	want := []string{"helm", "install", walkthrough.Release, "charts/bosh-injector", "-n", walkthrough.Namespace, "--create-namespace", "--wait"}
	if len(fields) < len(want) || !slices.Equal(fields[:len(want)], want) {
		t.Errorf("the README's helm install %q does not start with %q", c, strings.Join(want, " "))
		return
	}
	for i := len(want); i < len(fields); i += 2 {
		key, _, _ := strings.Cut(fields[min(i+1, len(fields)-1)], "=")
		if fields[i] != "--set" || !slices.Contains([]string{"image.repository", "image.tag", "dns.image.repository", "dns.image.tag"}, key) {
			t.Errorf("the README's helm install %q sets %s %s, which the walkthrough's install does not", c, fields[i], fields[min(i+1, len(fields)-1)])
		}
	}
}

// checkSecretKeys checks that the manifest Secret holds exactly the keys
// `objects` prints for the README's manifest and release-image ops file.
func checkSecretKeys(t *testing.T, dir string, manifest func() (*corev1.Secret, error)) {
	t.Helper()
	m, err := os.ReadFile(filepath.Join(dir, "test", "fixtures", "deployments", "shop.yml"))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile(filepath.Join(dir, "release-images.yml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := objects.Build(m, []deployment.OpsFile{{Name: "release-images.yml", Data: ops}}, objects.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(maps.Keys(res.Objects[0].(*corev1.Secret).Data))
	s, err := manifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(s.Data)); !slices.Equal(got, want) {
		t.Errorf("the manifest Secret's keys are %v, objects prints %v", got, want)
	}
}

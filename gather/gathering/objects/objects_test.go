package objects_test

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// updateBlock is the update block the director requires of a manifest.
const updateBlock = "update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000, update_watch_time: 1000}\n"

var deployments = filepath.Join("..", "..", "..", "test", "fixtures", "deployments")

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// golden is the warnings as comments followed by the YAML stream.
func golden(t *testing.T, res objects.Result) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, w := range res.Warnings {
		fmt.Fprintf(&out, "# warning: %s\n", w)
	}
	data, err := objects.EncodeAll(res.Objects)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(data)
	return out.Bytes()
}

// TestGolden builds every fixture deployment, shop with each of the ops
// files (all written for it), and a manifest using every mapping; the
// output must be stable.
func TestGolden(t *testing.T) {
	type tc struct {
		name, manifest string
		ops            []string
		opts           objects.Options
	}
	var cases []tc
	manifests, err := filepath.Glob(filepath.Join(deployments, "*.yml"))
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no fixture deployments: %v", err)
	}
	for _, m := range manifests {
		c := tc{name: strings.TrimSuffix(filepath.Base(m), ".yml"), manifest: m}
		// shop's golden is also `objects --namespace shop` (the CLI test);
		// backend and frontend share a namespace, left to kubectl -n.
		if c.name == "shop" {
			c.opts.Namespace = "shop"
		}
		// Its disk types are the cloud config's, sized as the e2e test
		// (TestNamedDisks) sizes them.
		if c.name == "named-disks" {
			c.opts.DiskSizes = map[string]resource.Quantity{"small": resource.MustParse("64Mi"), "large": resource.MustParse("128Mi")}
		}
		cases = append(cases, c)
	}
	opsFiles, err := filepath.Glob(filepath.Join(deployments, "ops", "*.yml"))
	if err != nil || len(opsFiles) == 0 {
		t.Fatalf("no ops fixtures: %v", err)
	}
	// An ops file named after a deployment ("rollout-change.yml") is
	// for it, the others for shop.
	for _, op := range opsFiles {
		name := strings.TrimSuffix(filepath.Base(op), ".yml")
		target := "shop"
		for _, m := range manifests {
			// The longest deployment name the ops file's name starts with.
			if d := strings.TrimSuffix(filepath.Base(m), ".yml"); strings.HasPrefix(name, d+"-") && len(d) > len(target) {
				target = d
			}
		}
		// With its deployment's options.
		opts := cases[slices.IndexFunc(cases, func(c tc) bool { return c.name == target })].opts
		cases = append(cases, tc{name: target + "+" + name, manifest: filepath.Join(deployments, target+".yml"), ops: []string{op}, opts: opts})
	}
	cases = append(cases, tc{name: "features", manifest: filepath.Join("testdata", "features.yml"), opts: objects.Options{
		StorageClasses: map[string]string{"fast": "ssd"},
		DiskSizes:      map[string]resource.Quantity{"fast": resource.MustParse("20Gi"), "medium": resource.MustParse("5Gi")},
	}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ops []deployment.OpsFile
			for _, p := range c.ops {
				ops = append(ops, deployment.OpsFile{Name: p, Data: read(t, p)})
			}
			res, err := objects.Build(read(t, c.manifest), ops, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			// One selector finds everything printed (delete-deployment).
			for _, o := range res.Objects {
				if o.GetLabels()[names.LabelDeployment] == "" {
					t.Errorf("%T %s has no label %s", o, o.GetName(), names.LabelDeployment)
				}
			}
			got := golden(t, res)
			again, err := objects.Build(read(t, c.manifest), ops, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(golden(t, again), got) {
				t.Fatal("two builds of the same input differ")
			}
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want := read(t, path); !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (run with -update):\n%s", path, got)
			}
		})
	}
}

// directorPlacement is the BOSH director's AZ placement for a fresh
// deployment (PlacementPlanner::AvailabilityZonePicker with the Balancer's
// MinWins tie strategy): each new instance goes to the AZ with the fewest
// instances so far, ties to the least AZ name, and new instances get the
// indexes 0, 1, … in placement order. It returns each index's AZ.
func directorPlacement(instances int, azs []string) []string {
	placed := map[string]int{}
	out := make([]string, instances)
	for i := range out {
		best := ""
		for _, az := range azs {
			if best == "" || placed[az] < placed[best] || placed[az] == placed[best] && az < best {
				best = az
			}
		}
		placed[best]++
		out[i] = best
	}
	return out
}

func TestReplicasMatchDirectorPlacement(t *testing.T) {
	for azCount := 1; azCount <= 3; azCount++ {
		for n := 1; n <= 7; n++ {
			azs := []string{"z1", "z2", "z3"}[:azCount]
			t.Run(fmt.Sprintf("%d instances over %d AZs", n, azCount), func(t *testing.T) {
				m := fmt.Sprintf("name: d\nreleases: [{name: r, version: '1', image: img}]\n"+updateBlock+"instance_groups:\n- {name: g, azs: [%s], instances: %d, jobs: [{name: j, release: r}]}\n",
					strings.Join(azs, ", "), n)
				res, err := objects.Build([]byte(m), nil, objects.Options{})
				if err != nil {
					t.Fatal(err)
				}
				want := directorPlacement(n, azs)
				seen := make([]int, n)
				for _, o := range res.Objects {
					sts, ok := o.(*appsv1.StatefulSet)
					if !ok {
						continue
					}
					azIndex, err := strconv.Atoi(sts.Spec.Template.Labels[names.LabelAZIndex])
					if err != nil {
						t.Fatal(err)
					}
					for ordinal := range int(*sts.Spec.Replicas) {
						index := instance.Index(ordinal, azIndex, azCount)
						if index >= n {
							t.Fatalf("%s pod %d would be index %d of %d", sts.Name, ordinal, index, n)
						}
						seen[index]++
						if az := azs[azIndex-1]; az != want[index] {
							t.Errorf("index %d runs in %s; the director places it in %s", index, az, want[index])
						}
					}
				}
				for i, c := range seen {
					if c != 1 {
						t.Errorf("index %d exists %d times", i, c)
					}
				}
			})
		}
	}
}

func TestErrandsBecomeSuspendedIndexedJobs(t *testing.T) {
	res, err := objects.Build(read(t, filepath.Join("testdata", "features.yml")), nil, objects.Options{
		DiskSizes: map[string]resource.Quantity{"fast": resource.MustParse("1Gi"), "medium": resource.MustParse("1Gi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var completions []int32
	for _, o := range res.Objects {
		if j, ok := o.(*batchv1.Job); ok {
			// A template run-errand copies: applying it runs nothing.
			if !ptr.Deref(j.Spec.Suspend, false) {
				t.Errorf("errand Job %s is not suspended", j.Name)
			}
			if *j.Spec.CompletionMode != batchv1.IndexedCompletion || j.Spec.Template.Labels[names.LabelInstanceGroup] != "migrate" {
				t.Errorf("job %s: %+v", j.Name, j.Spec)
			}
			completions = append(completions, *j.Spec.Completions)
		}
		if s, ok := o.(*appsv1.StatefulSet); ok && s.Spec.Template.Labels[names.LabelInstanceGroup] == "migrate" {
			t.Errorf("errand group has StatefulSet %s", s.Name)
		}
	}
	if !slices.Equal(completions, []int32{2, 1}) {
		t.Errorf("errand Jobs' completions %v, want [2 1]", completions)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ name, manifest, want string }{
		{"no instance groups", "name: d\n", "manifest 'd' has no instance groups"},
		{"typo", "name: d\ninstance_group: []\n", "is the key spelled 'instance_groups'?"},
		{"disk type without size", "name: d\nreleases: [{name: r, version: '1', image: i}]\n" + updateBlock + "instance_groups:\n- {name: g, instances: 1, persistent_disk_type: big, jobs: [{name: j, release: r}]}\n",
			"instance group 'g': persistent_disk_type 'big' is sized by the cloud config, which bosh-injector does not read: give its size with --disk-size big=10Gi"},
		{"named disk type without size", "name: d\nreleases: [{name: r, version: '1', image: i}]\n" + updateBlock + "instance_groups:\n- {name: g, instances: 1, persistent_disks: [{name: data, type: big}], jobs: [{name: j, release: r}]}\n",
			"instance group 'g': persistent_disks 'data' has type 'big', which the cloud config sizes and bosh-injector does not read: give its size with --disk-size big=10Gi"},
		{"named disks of one claim name", "name: d\nreleases: [{name: r, version: '1', image: i}]\n" + updateBlock + "instance_groups:\n- {name: g, instances: 1, persistent_disks: [{name: a_b, type: big}, {name: a-b, type: big}], jobs: [{name: j, release: r}]}\n",
			"instance group 'g': persistent_disks names 'a_b' and 'a-b' both make the claim name 'disk-a-b': rename one"},
		{"no image", "name: d\nreleases: [{name: r, version: '1'}]\n" + updateBlock + "instance_groups:\n- {name: g, instances: 1, jobs: [{name: j, release: r}]}\n",
			"instance group 'g', job 'j': cannot derive the image of release 'r'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := objects.Build([]byte(c.manifest), nil, objects.Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestTemplatesMarkThePlaceholder: every template names its one container
// as the placeholder, the default `<job>-<job>` and one Options.Containers
// gives alike, so the webhook removes it when no process has that name.
func TestTemplatesMarkThePlaceholder(t *testing.T) {
	m := "name: cf\nreleases: [{name: nats, version: '56', image: img}]\n" + updateBlock + "instance_groups:\n" +
		"- {name: nats, instances: 1, jobs: [{name: nats-tls, release: nats}]}\n" +
		"- {name: named, instances: 1, jobs: [{name: nats, release: nats}]}\n" +
		"- {name: smoke, instances: 1, lifecycle: errand, jobs: [{name: smoke-tests, release: nats}]}\n"
	res, err := objects.Build([]byte(m), nil, objects.Options{Containers: map[string]objects.Container{"named": {Job: "nats", Name: "nats-nats-wrapper"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cf-nats": "nats-tls-nats-tls", "cf-named": "nats-nats-wrapper", "cf-smoke": "smoke-tests-smoke-tests"}
	got := map[string]string{}
	for _, o := range res.Objects[1:] {
		var tmpl corev1.PodTemplateSpec
		switch w := o.(type) {
		case *appsv1.StatefulSet:
			tmpl = w.Spec.Template
		case *batchv1.Job:
			tmpl = w.Spec.Template
		case *policyv1.PodDisruptionBudget:
			continue
		default:
			t.Fatalf("unexpected %T %s", o, o.GetName())
		}
		if len(tmpl.Spec.Containers) != 1 || tmpl.Spec.Containers[0].Name != tmpl.Annotations[names.AnnotationPlaceholderContainer] {
			t.Errorf("%s: containers %v, placeholder annotation %q", o.GetName(), tmpl.Spec.Containers, tmpl.Annotations[names.AnnotationPlaceholderContainer])
		}
		got[o.GetName()] = tmpl.Annotations[names.AnnotationPlaceholderContainer]
	}
	if !maps.Equal(got, want) {
		t.Errorf("placeholders %v, want %v", got, want)
	}
}

// A release image pinned by digest (release-image's ops file) names the
// template's container without the digest: rebuilt images change the
// objects not at all, and the webhook runs the accepted image.
func TestTemplatesNameTheReleaseImageWithoutDigest(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	m := "name: cf\nreleases: [{name: nats, version: '56', image: 'registry.example/nats:jammy-56@" + digest + "'}]\n" + updateBlock +
		"instance_groups:\n- {name: nats, instances: 1, jobs: [{name: nats, release: nats}]}\n"
	res, err := objects.Build([]byte(m), nil, objects.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Objects[1].(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0].Image; got != "registry.example/nats:jammy-56" {
		t.Errorf("image %q, want registry.example/nats:jammy-56", got)
	}
}

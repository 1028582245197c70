// Package errand runs a deployment's errand as `bosh run-errand` does:
// which instances run it (Resolve, the director's errand lookup), the run
// Job made from an errand group's suspended template Job (RunJob), and
// what a run must have changed for `--when-changed` (State). Run does the
// I/O on the cluster.
package errand

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/client/instances"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Annotations and labels of errand runs.
const (
	// AnnotationRuns on a template Job counts the runs made of it; the run
	// Job's name ends in the number, and updating the count with the
	// template's resourceVersion keeps two runs from taking one number.
	AnnotationRuns = names.Prefix + "errand-runs"
	// AnnotationSucceededPrefix starts the annotation key, one per errand,
	// on a template Job or a service group's StatefulSet, whose value is
	// the State of the errand's last successful run there.
	AnnotationSucceededPrefix = "errand." + names.Prefix
	// LabelTemplate on a run Job names the template Job it was made of.
	LabelTemplate = names.Prefix + "errand-template"
)

// SucceededAnnotation is the key recording errand's last successful run.
func SucceededAnnotation(errand string) string {
	return AnnotationSucceededPrefix + names.LabelValue(errand)
}

// Target is what running an errand means in a deployment.
type Target struct {
	Errand string
	// Lifecycle is the errand group (lifecycle: errand) run on its first
	// instance, as the director runs it; nil for a colocated errand.
	Lifecycle *instances.Instance
	// Colocated are the service groups' instances that have a job named
	// Errand, which runs its bin/run there.
	Colocated []instances.Instance
	// Warnings are what the director warns about the request.
	Warnings []string
}

// Resolve finds the errand as the director's errand provider does: a job
// of that name in any instance group, run in the instances of its groups
// (a lifecycle errand group on its first instance); else an instance group
// of that name, which must be an errand group, run on its first instance.
// Filters narrow the instances, except for an errand named by its group.
func Resolve(m *manifest.Manifest, errand string, filters []instances.Filter) (Target, error) {
	t := Target{Errand: errand}
	var all []instances.Instance
	for _, g := range m.InstanceGroups {
		for i := range g.Instances {
			all = append(all, instances.Instance{Group: g.Name, Index: i, ID: instance.ID(m.Name, g.Name, i)})
		}
	}
	matched := all
	if len(filters) > 0 {
		matched = nil
		var unmatched []string
		for _, f := range filters {
			n := 0
			for _, in := range all {
				if f.Matches(in, all) {
					n++
					if !slices.Contains(matched, in) {
						matched = append(matched, in)
					}
				}
			}
			if n == 0 {
				unmatched = append(unmatched, f.String())
			}
		}
		if len(unmatched) > 0 {
			return Target{}, fmt.Errorf("No instances match selection criteria: [%s]", strings.Join(unmatched, ", "))
		}
	}

	var byJob []*manifest.InstanceGroup
	for i := range m.InstanceGroups {
		g := &m.InstanceGroups[i]
		if slices.ContainsFunc(g.Jobs, func(j manifest.Job) bool { return j.Name == errand }) {
			byJob = append(byJob, g)
		}
	}
	if len(byJob) == 0 {
		g := m.InstanceGroup(errand)
		switch {
		case g == nil:
			return Target{}, fmt.Errorf("Errand '%s' doesn't exist", errand)
		case g.Lifecycle != "errand":
			return Target{}, fmt.Errorf("Instance group '%s' is not an errand. To mark an instance group as an errand set its lifecycle to 'errand' in the deployment manifest.", g.Name)
		case g.Instances == 0:
			return Target{}, fmt.Errorf("Instance '%s/%s/0' doesn't exist", m.Name, errand)
		case len(filters) > 0:
			return Target{}, fmt.Errorf("Filtering by instances is not supported when running errand by instance group name")
		}
		t.Lifecycle = &instances.Instance{Group: g.Name, Index: 0, ID: instance.ID(m.Name, g.Name, 0)}
		return t, nil
	}
	// The director warns whenever a group has the errand's name too; when
	// the job's only group is that errand group (an errand group named after
	// its job, as is usual) both readings run the same instance, so there is
	// nothing ambiguous to warn about.
	if g := m.InstanceGroup(errand); g != nil && !(len(byJob) == 1 && byJob[0] == g) {
		t.Warnings = append(t.Warnings, fmt.Sprintf("Ambiguous request: the requested errand name '%s' matches both a job name and an errand instance group name. Executing errand on all relevant instances with job '%s'.", errand, errand))
	}
	for _, g := range byJob {
		var in []instances.Instance
		for _, i := range matched {
			if i.Group == g.Name {
				in = append(in, i)
			}
		}
		if len(in) > 1 {
			t.Warnings = append(t.Warnings, "Executing errand on multiple instances in parallel. Use the `--instance` flag to run the errand on a single instance.")
		}
		if g.Lifecycle == "errand" {
			first := instances.Instance{Group: g.Name, Index: 0, ID: instance.ID(m.Name, g.Name, 0)}
			if slices.Contains(in, first) {
				t.Lifecycle = &first
			}
			continue
		}
		t.Colocated = append(t.Colocated, in...)
	}
	if t.Lifecycle == nil && len(t.Colocated) == 0 {
		return Target{}, fmt.Errorf("errand '%s': no instance of groups %s matches", errand, groupNames(byJob))
	}
	return t, nil
}

func groupNames(gs []*manifest.InstanceGroup) string {
	var out []string
	for _, g := range gs {
		out = append(out, "'"+g.Name+"'")
	}
	return strings.Join(out, ", ")
}

// generatedLabels are what the apiserver adds to a Job's pod template; a
// copy must go without them, or its selector would select the template's
// pods.
var generatedLabels = []string{batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name"}

// RunJob is run number run of a template Job: the template unsuspended,
// under its own name and labels, running its first instance (completion
// index 0, the director's first instance of an errand group) with the
// group's resolved version pinned.
func RunJob(template *batchv1.Job, run, resolvedVersion int) *batchv1.Job {
	spec := *template.Spec.DeepCopy()
	spec.Suspend = nil
	spec.Selector = nil
	spec.ManualSelector = nil
	spec.Completions = ptr.To(int32(1))
	spec.Parallelism = ptr.To(int32(1))
	for _, l := range generatedLabels {
		delete(spec.Template.Labels, l)
	}
	if spec.Template.Annotations == nil {
		spec.Template.Annotations = map[string]string{}
	}
	spec.Template.Annotations[names.AnnotationResolvedVersion] = strconv.Itoa(resolvedVersion)
	labels := maps.Clone(template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelTemplate] = template.Name
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.DNS1123Label(template.Name + "-" + strconv.Itoa(run)),
			Namespace: template.Namespace,
			Labels:    labels,
		},
		Spec: spec,
	}
}

// State is what an errand's run depends on in one place: the group's
// resolved version and the pod template (images, resources, ...) it runs
// with. A run is skipped with --when-changed when every place's State is
// that of its last successful run, as the director compares its instances'
// configuration and packages.
func State(resolvedVersion int, podTemplate any) (string, error) {
	data, err := json.Marshal(podTemplate)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return fmt.Sprintf("resolved-version %d, pod template %s", resolvedVersion, hex.EncodeToString(sum[:8])), nil
}

// Package objects turns a BOSH deployment manifest into the Kubernetes
// objects a user applies to run it with bosh-injector: the manifest Secret
// the job runner gathers, per instance group and AZ a labelled StatefulSet
// (an Indexed Job for errands) placed in the AZ's zone, and per service
// group a PodDisruptionBudget. The pod templates stay minimal: everything
// the webhook injects is left out. The objects are a starting point the user
// owns, so their order and content depend on the manifest only.
package objects

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// VolumeStore is the volumeClaimTemplate the webhook mounts for jobs with
// a persistent disk (the pod layout's `store`).
const VolumeStore = "store"

// maxWorkloadName keeps a StatefulSet's pods' controller-revision-hash label
// (`<name>-<10 characters>`) within 63 characters.
const maxWorkloadName = 52

// Options are what the manifest cannot say about the cluster.
type Options struct {
	// Namespace of every object; "" leaves it out, for `kubectl -n`.
	Namespace string
	// StorageClasses maps a persistent_disk_type to a StorageClass.
	StorageClasses map[string]string
	// DiskSizes gives the size of a persistent_disk_type, which the cloud
	// config defines.
	DiskSizes map[string]resource.Quantity
	// Containers gives, per instance group, the pod template's container;
	// by default the first job's `<job>-<job>`, the container the webhook
	// makes of a job's process named like the job. Either way it is marked
	// a placeholder, which the webhook removes when no process has its name.
	Containers map[string]Container
	// Placement ties AZs to the cluster's zones.
	Placement Placement
}

// Container is the one container of a pod template: the webhook completes
// the container of that name, a BPM process's `<job>-<process>` or an
// errand's `<job>-run`, in the release image of Job.
type Container struct {
	Job, Name string
}

// Result is the objects in apply order and what of the manifest they could
// not express.
type Result struct {
	Objects  []client.Object
	Warnings []string
	// Zones is the zone each AZ's pods require.
	Zones map[string]string
}

// Build makes the objects of a manifest with its ops files (applied in
// order, as the job runner applies the Secret's ops-* keys).
func Build(manifestYAML []byte, ops []deployment.OpsFile, opts Options) (Result, error) {
	doc, err := deployment.Document(manifestYAML, ops)
	if err != nil {
		return Result{}, err
	}
	m, err := manifest.FromDocument(doc)
	if err != nil {
		return Result{}, err
	}
	if len(m.InstanceGroups) == 0 {
		return Result{}, fmt.Errorf("manifest '%s' has no instance groups: nothing to run (is the key spelled 'instance_groups'?)", m.Name)
	}
	if err := checkSecretSize(SecretName(m.Name), manifestYAML, ops); err != nil {
		return Result{}, err
	}
	b := builder{m: m, opts: opts}
	b.res.Objects = append(b.res.Objects, b.secret(manifestYAML, ops))
	plan, err := update.PlanOf(m.Raw)
	if err != nil {
		return Result{}, err
	}
	b.update = map[string]update.Config{}
	for _, g := range plan {
		b.update[g.Name] = g.Update
	}
	b.warnUnhonoured(m.Raw, "update")
	for i := range m.InstanceGroups {
		if err := b.group(&m.InstanceGroups[i]); err != nil {
			return Result{}, err
		}
	}
	return b.res, nil
}

type builder struct {
	m    *manifest.Manifest
	opts Options
	res  Result
	// update is each service group's update config: its block over the
	// deployment's.
	update map[string]update.Config
}

func (b *builder) warn(format string, args ...any) {
	b.res.Warnings = append(b.res.Warnings, fmt.Sprintf(format, args...))
}

// meta is the metadata of every object printed: the deployment label lets
// one selector find them all (delete-deployment, kubectl -l).
func (b *builder) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: b.opts.Namespace,
		Labels: map[string]string{names.LabelDeployment: names.LabelValue(b.m.Name)}}
}

// SecretName is the manifest Secret's name.
func SecretName(deployment string) string { return names.DNS1123Label(deployment + "-manifest") }

// OpsKey is the manifest Secret key of the i-th (0-based) ops file named
// name: `ops-NN-<name>.yaml`, so the job runner's key order is the order
// given.
func OpsKey(i int, name string) string {
	base := name[strings.LastIndexByte(name, '/')+1:]
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".yml"), ".yaml")
	return fmt.Sprintf("ops-%02d-%s.yaml", i+1, names.DNS1123Label(base))
}

// secret is written with data, not stringData: the server keeps only data,
// so kubectl apply's three-way merge sees an unchanged Secret as unchanged
// and deletes the key of an ops file no longer given.
func (b *builder) secret(manifestYAML []byte, ops []deployment.OpsFile) client.Object {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: b.meta(SecretName(b.m.Name)),
		Data:       map[string][]byte{names.ManifestKey: manifestYAML},
	}
	for i, op := range ops {
		s.Data[OpsKey(i, op.Name)] = op.Data
	}
	return s
}

// group adds a group's workloads, one per AZ (one when it has no AZs).
func (b *builder) group(g *manifest.InstanceGroup) error {
	if len(g.Jobs) == 0 {
		return fmt.Errorf("instance group '%s' has no jobs", g.Name)
	}
	if sorted := slices.Sorted(slices.Values(g.AZs)); !slices.Equal(sorted, g.AZs) {
		b.warn("instance group '%s': azs %v are not in name order: a BOSH director places index 0 in AZ '%s', bosh-injector in AZ '%s' (az-index 1); list them in name order to get the director's placement",
			g.Name, g.AZs, sorted[0], g.AZs[0])
	}
	tmpl, err := b.podTemplate(g)
	if err != nil {
		return err
	}
	claim, err := b.store(g)
	if err != nil {
		return err
	}
	named, err := b.namedDisks(g)
	if err != nil {
		return err
	}
	strategy := b.updateStrategy(g)
	replicas := instance.Replicas(g.Instances, len(g.AZs))
	for a, n := range replicas {
		raw := b.m.Name + "-" + g.Name
		labels := maps.Clone(tmpl.Labels)
		az := ""
		if len(g.AZs) > 0 {
			az = g.AZs[a]
			raw += "-" + az
			labels[names.LabelAZIndex] = strconv.Itoa(a + 1)
		}
		name := names.DNS1123LabelMax(raw, maxWorkloadName)
		t := *tmpl.DeepCopy()
		t.Labels = labels
		b.place(&t, az, labels)
		if g.Lifecycle == "errand" {
			b.res.Objects = append(b.res.Objects, b.job(name, t, n))
			continue
		}
		sts := &appsv1.StatefulSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
			ObjectMeta: b.meta(name),
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(n)),
				// A director creates a group's instances together; with
				// OrderedReady, a cluster whose members are ready only
				// with a quorum would never get its second pod.
				PodManagementPolicy: appsv1.ParallelPodManagement,
				ServiceName:         instance.GroupServiceName(b.m.Name, g.Name),
				Selector:            &metav1.LabelSelector{MatchLabels: labels},
				Template:            t,
				UpdateStrategy:      strategy,
			},
		}
		if claim != nil {
			sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{*claim}
		}
		sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, named...)
		if len(sts.Spec.VolumeClaimTemplates) > 0 {
			retainClaims(sts)
		}
		b.res.Objects = append(b.res.Objects, sts)
	}
	pdb, err := b.disruptionBudget(g)
	if pdb != nil {
		b.res.Objects = append(b.res.Objects, pdb)
	}
	return err
}

// job is an errand's Job in one AZ: its completion index is the pod's
// ordinal, as a StatefulSet's pod index is. A BOSH errand runs once and is
// not retried, and only when asked (`bosh run-errand`): the Job is
// suspended, a template that `bosh-injector run-errand` copies into a new
// Job for each run, so applying the objects never runs it.
func (b *builder) job(name string, t corev1.PodTemplateSpec, n int) client.Object {
	t.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: b.meta(name),
		Spec: batchv1.JobSpec{
			Suspend:        ptr.To(true),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To(int32(n)),
			Parallelism:    ptr.To(int32(n)),
			BackoffLimit:   ptr.To(int32(0)),
			Template:       t,
		},
	}
}

// podTemplate is the labels and the one container the webhook completes,
// named after its job's release image. Process container names come from bpm.yml, which
// the manifest does not hold, so the template marks the container a
// placeholder: where no process has its name the webhook removes it, which
// would otherwise run the image's own command beside the processes.
func (b *builder) podTemplate(g *manifest.InstanceGroup) (corev1.PodTemplateSpec, error) {
	c, ok := b.opts.Containers[g.Name]
	if !ok {
		c = Container{Job: g.Jobs[0].Name, Name: names.DNS1123LabelMax(g.Jobs[0].Name+"-"+g.Jobs[0].Name, 63)}
	}
	i := slices.IndexFunc(g.Jobs, func(j manifest.Job) bool { return j.Name == c.Job })
	if i < 0 {
		return corev1.PodTemplateSpec{}, fmt.Errorf("instance group '%s' has no job '%s' for container '%s'", g.Name, c.Job, c.Name)
	}
	image, err := b.m.ReleaseImage(g.Jobs[i].Release)
	if err != nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("instance group '%s', job '%s': %w", g.Name, c.Job, err)
	}
	// A container needs an image; the webhook replaces the placeholder's
	// with the accepted release image. Without its digest the template
	// stays the same when the release images are rebuilt, so applying the
	// objects again does not roll every pod at once: the deploy rolls the
	// new images out.
	image, _, _ = strings.Cut(image, "@")
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{
				names.LabelDeployment:    names.LabelValue(b.m.Name),
				names.LabelInstanceGroup: names.LabelValue(g.Name),
			},
			Annotations: map[string]string{names.AnnotationPlaceholderContainer: c.Name},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: c.Name, Image: image}}},
	}
	t.Spec.Resources, err = b.resources(g)
	return t, err
}

// resources maps vm_resources onto pod-level requests: BOSH sizes the VM,
// which all of an instance's processes share, as a pod's resources are.
func (b *builder) resources(g *manifest.InstanceGroup) (*corev1.ResourceRequirements, error) {
	for _, k := range []string{"vm_type", "vm_extensions"} {
		if g.Raw.Has(k) {
			b.warn("instance group '%s': %s names cloud config, which bosh-injector does not read; give the pod template resources or a nodeSelector instead", g.Name, k)
		}
	}
	v, _ := g.Raw.Get("vm_resources")
	if v == nil {
		return nil, nil
	}
	vm, ok := v.(*yamlvalue.Map)
	if !ok {
		return nil, fmt.Errorf("instance_groups.%s.vm_resources: expected a hash", g.Name)
	}
	req := corev1.ResourceList{}
	for _, f := range []struct {
		key  string
		name corev1.ResourceName
		unit string
	}{{"cpu", corev1.ResourceCPU, ""}, {"ram", corev1.ResourceMemory, "Mi"}} {
		n, ok, err := intField(vm, f.key)
		if err != nil {
			return nil, fmt.Errorf("instance_groups.%s.vm_resources.%s: %w", g.Name, f.key, err)
		}
		if ok {
			if req[f.name], err = vmQuantity(n, f.unit); err != nil {
				return nil, fmt.Errorf("instance_groups.%s.vm_resources.%s: %w", g.Name, f.key, err)
			}
		}
	}
	if vm.Has("ephemeral_disk_size") {
		b.warn("instance group '%s': vm_resources.ephemeral_disk_size is not mapped: /var/vcap/data is an emptyDir the webhook adds", g.Name)
	}
	if len(req) == 0 {
		return nil, nil
	}
	return &corev1.ResourceRequirements{Requests: req}, nil
}

// store is the volumeClaimTemplate of a group's persistent disk, nil
// without one.
func (b *builder) store(g *manifest.InstanceGroup) (*corev1.PersistentVolumeClaim, error) {
	diskType, err := stringField(g.Raw, "persistent_disk_type")
	if err == nil && diskType == "" {
		diskType, err = stringField(g.Raw, "persistent_disk_pool")
	}
	if err != nil {
		return nil, fmt.Errorf("instance_groups.%s: %w", g.Name, err)
	}
	var size resource.Quantity
	switch {
	case g.PersistentDisk > 0:
		size = resource.MustParse(strconv.Itoa(g.PersistentDisk) + "Mi")
	case diskType != "":
		s, ok := b.opts.DiskSizes[diskType]
		if !ok {
			return nil, fmt.Errorf("instance group '%s': persistent_disk_type '%s' is sized by the cloud config, which bosh-injector does not read: give its size with --disk-size %s=10Gi", g.Name, diskType, diskType)
		}
		size = s
	default:
		return nil, nil
	}
	if g.Lifecycle == "errand" {
		b.warn("instance group '%s': the errand's persistent disk is not mapped: a Job has no volumeClaimTemplates", g.Name)
		return nil, nil
	}
	return b.claim(g, VolumeStore, "persistent_disk_type", diskType, size), nil
}

// unhonoured are the update keys bosh-injector has no equivalent for, and
// why. The others (canaries, max_in_flight, watch times, serial) the
// operator's deploy honours.
var unhonoured = map[string]string{
	"vm_strategy":                       "a StatefulSet replaces a pod in place",
	"initial_deploy_az_update_strategy": "a first deploy starts the AZs one after another, as an update does",
}

// warnUnhonoured warns of an update block's keys without an equivalent.
func (b *builder) warnUnhonoured(m *yamlvalue.Map, where string) {
	v, _ := m.Get("update")
	u, _ := v.(*yamlvalue.Map)
	if u == nil {
		return
	}
	for _, k := range u.Keys() {
		if why, ok := unhonoured[k]; ok {
			b.warn("%s.%s is not mapped: %s", where, k, why)
		}
	}
}

// updateStrategy maps max_in_flight, the group's over the deployment's, to
// a rolling update's maxUnavailable, which a deploy's batches of that many
// instances of an AZ are updated with at once (where the cluster has the
// MaxUnavailableStatefulSet feature; else one at a time).
func (b *builder) updateStrategy(g *manifest.InstanceGroup) appsv1.StatefulSetUpdateStrategy {
	b.warnUnhonoured(g.Raw, "instance_groups."+g.Name+".update")
	c, ok := b.update[g.Name]
	if !ok {
		// An errand's Job is not updated, it runs.
		return appsv1.StatefulSetUpdateStrategy{}
	}
	max := intstr.Parse(c.MaxInFlight)
	if max.Type == intstr.Int && max.IntVal < 1 {
		// The director updates at least one instance at a time.
		max = intstr.FromInt32(1)
	}
	return appsv1.StatefulSetUpdateStrategy{
		Type:          appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: &max},
	}
}

func intField(m *yamlvalue.Map, key string) (int, bool, error) {
	v, ok := m.Get(key)
	if !ok || v == nil {
		return 0, false, nil
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, false, fmt.Errorf("expected a non-negative integer, got %v", v)
	}
	return int(n), true, nil
}

func stringField(m *yamlvalue.Map, key string) (string, error) {
	v, _ := m.Get(key)
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	}
	return "", fmt.Errorf("%s: expected a string, got %v", key, v)
}

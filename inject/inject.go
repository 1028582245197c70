// Package inject turns a labelled pod into a BOSH instance, purely: given the
// pod, its instance group's BPM info and the instance, Mutate adds the
// volumes, the init containers that copy and render the jobs, and one
// container per BPM process.
// What it adds is recorded in an annotation, so injecting an injected pod
// strips that first and gives the same pod as one injection.
package inject

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Volume names and mount points of the pod layout.
const (
	VolumeAllReleases = "bosh-all-releases"
	VolumeJobs        = "bosh-jobs"
	VolumeData        = "bosh-data"
	VolumeSys         = "bosh-sys"
	VolumeResolved    = "bosh-resolved"
	// VolumeStore is the user's volumeClaimTemplate for persistent disks.
	VolumeStore = "store"

	AllReleasesDir = "/var/vcap/all-releases"
	ResolvedDir    = "/var/vcap/bosh-injector/resolved"

	// VcapUID is the user BOSH processes run as (BPM's vcap).
	VcapUID = 1000
)

// Settings are the operator's settings.
type Settings struct {
	// OperatorImage runs the render init container.
	OperatorImage string
	DNS           DNS
	// DrainSeconds bounds an instance's pre-stop and drain scripts
	// together; DefaultDrainSeconds when 0.
	DrainSeconds int
	// ReleaseJobs is how render gets the jobs of the release images:
	// ReleaseJobsCopy when empty.
	ReleaseJobs ReleaseJobs
}

// ReleaseJobs is how the release images' jobs reach the render container.
type ReleaseJobs string

const (
	// ReleaseJobsCopy copies them into an emptyDir, one init container per
	// release.
	ReleaseJobsCopy ReleaseJobs = "copy"
	// ReleaseJobsImage mounts each release image read-only as a Kubernetes
	// image volume (GA in 1.36; the node's runtime must support it): no
	// container starts for it.
	ReleaseJobsImage ReleaseJobs = "image"
)

// DefaultDrainSeconds is the drain budget of an instance whose jobs have
// pre-stop or drain scripts, when the operator sets none.
const DefaultDrainSeconds = 120

// postStopSeconds is the grace left for post-stop scripts.
const postStopSeconds = 10

// launcherCaps are what the launcher needs besides a process's BPM
// capabilities: to prepare the BPM directories and log files as root for
// vcap (CHOWN, DAC_OVERRIDE, FOWNER), to become vcap (SETUID, SETGID) and
// to signal the vcap process (KILL). The process itself gets only its BPM
// capabilities, ambient.
var launcherCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"}

// rootCaps are the capabilities of the containers that run a job's scripts
// as root (pre-start, monit start programs): the launcher's, which cover
// preparing files for vcap and dropping to it, and nothing beyond.
var rootCaps = capabilities(launcherCaps)

// Instance is the pod's BOSH instance.
type Instance struct {
	Index     int
	AZ        string
	Bootstrap bool
}

// Plan is everything Mutate needs.
type Plan struct {
	Info     *bpm.Info
	Instance Instance
	Settings Settings
	// Namespace is the pod's.
	Namespace string
	// ResolvedDigest is the digest of the resolved Secret the operator
	// accepted; the render container refuses other content.
	ResolvedDigest string
	// Held says the deploy has not started the pod's instance yet: the pod
	// waits behind the deploy's scheduling gate (see gate.go).
	Held bool
}

// record is the content of the injected annotation.
type record struct {
	InitContainers []string `json:"initContainers"`
	Containers     []string `json:"containers"`
	Volumes        []string `json:"volumes"`
	// Completed holds the user's own containers, as they were, that the
	// injection completed.
	Completed []corev1.Container `json:"completed,omitempty"`
	Secrets   []string           `json:"secrets"`
	DNS       *dnsRecord         `json:"dns,omitempty"`
	// Placeholder is the placeholder container the injection removed.
	Placeholder *placeholder `json:"placeholder,omitempty"`
	// GracePeriod and HostPID are the pod's own values where the injection
	// changed them.
	GracePeriod *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	HostPID     *bool  `json:"hostPID,omitempty"`
	// DefaultContainer says the injection set annotationDefaultContainer.
	DefaultContainer bool `json:"defaultContainer,omitempty"`
	// Gated says the injection added the deploy's scheduling gate.
	Gated bool `json:"gated,omitempty"`
}

// annotationDefaultContainer is the container kubectl logs and exec choose
// when none is named.
const annotationDefaultContainer = "kubectl.kubernetes.io/default-container"

// CopyContainer copies a release's jobs out of its image into the shared
// volume, with the shell the release image has; the gathering Job uses it
// too. The destination, which holds the manifest's release name, is the
// script's argument, never part of the script.
func CopyContainer(release, image, volume string) corev1.Container {
	dst := path.Join(AllReleasesDir, "jobs-src", release)
	return corev1.Container{
		Name:                     "copy-" + names.DNS1123LabelMax(release, 58),
		Image:                    image,
		Command:                  []string{"/bin/sh", "-c", `mkdir -p -- "$1" && cp -R /var/vcap/jobs-src/. "$1"/`, "copy", dst},
		VolumeMounts:             []corev1.VolumeMount{{Name: volume, MountPath: AllReleasesDir}},
		SecurityContext:          Hardened(nil),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// Hardened is the security context of an injected container that is not
// privileged: no privilege escalation, the runtime's default seccomp
// profile, and of the capabilities only add, sorted (none: dropped all).
func Hardened(add []corev1.Capability) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: add},
	}
}

// asUser sets the user and group a hardened container runs as.
func asUser(sc *corev1.SecurityContext, uid int64) *corev1.SecurityContext {
	sc.RunAsUser, sc.RunAsGroup = ptr.To(uid), ptr.To(uid)
	return sc
}

// Mutate injects plan into pod. An already injected pod is stripped first.
// It fails with a *Denial when the pod cannot be made a valid instance.
func Mutate(pod *corev1.Pod, plan Plan) error {
	_, err := MutateFrom(pod, plan, Build)
	return err
}

// MutateFrom is Mutate taking what the injection adds regardless of the
// pod from build (the webhook keeps Build's Parts per instance), and
// saying what it added as built.
func MutateFrom(pod *corev1.Pod, plan Plan, build func(Plan) *Parts) (Added, error) {
	if err := Strip(pod); err != nil {
		return Added{}, err
	}
	if v, ok := pod.Annotations[names.AnnotationReleaseJobs]; ok {
		if r := ReleaseJobs(v); r != ReleaseJobsImage && r != ReleaseJobsCopy {
			return Added{}, deny(ReasonBadReleaseJobs, "annotation %s is %q: set %s or %s, or remove it for the operator's choice", names.AnnotationReleaseJobs, v, ReleaseJobsImage, ReleaseJobsCopy)
		}
		plan.Settings.ReleaseJobs = ReleaseJobs(v)
	}
	parts := build(plan)
	for _, d := range parts.denials {
		if d.without == "" || !hasVolume(pod, d.without) {
			return Added{}, d.Denial
		}
	}
	info := plan.Info
	rec := record{Secrets: []string{info.ResolvedSecret}, InitContainers: parts.initNames, Volumes: parts.volumeNames}
	// The parts are shared: the pod gets copies of their slices.
	pod.Spec.InitContainers = slices.Concat(parts.inits, pod.Spec.InitContainers)
	rec.Placeholder = removePlaceholder(pod, parts.containers)
	for _, c := range parts.containers {
		if i := slices.IndexFunc(pod.Spec.Containers, func(u corev1.Container) bool { return u.Name == c.Name }); i >= 0 {
			rec.Completed = append(rec.Completed, pod.Spec.Containers[i])
			user := pod.Spec.Containers[i]
			if user.Name == pod.Annotations[names.AnnotationPlaceholderContainer] {
				// `objects` wrote its image, which only names the release:
				// the accepted BPM info's image (rebuilt, a new digest)
				// runs, as in the pod's other process containers.
				user.Image = ""
			}
			pod.Spec.Containers[i] = complete(c, user)
			continue
		}
		rec.Containers = append(rec.Containers, c.Name)
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	for _, c := range parts.setup {
		rec.Containers = append(rec.Containers, c.Name)
	}
	pod.Spec.Containers = slices.Concat(parts.setup, pod.Spec.Containers)
	if _, ok := pod.Annotations[annotationDefaultContainer]; !ok && len(parts.setup) > 0 && len(pod.Spec.Containers) > len(parts.setup) {
		// kubectl logs and exec keep going to the first process, not to
		// the setup now first.
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[annotationDefaultContainer] = pod.Spec.Containers[len(parts.setup)].Name
		rec.DefaultContainer = true
	}
	pod.Spec.Volumes = slices.Concat(pod.Spec.Volumes, parts.volumes)
	if parts.store != nil && !hasVolume(pod, VolumeStore) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, *parts.store)
		rec.Volumes = append(slices.Clip(rec.Volumes), VolumeStore)
	}
	rec.DNS = setDNS(pod, plan.Settings.DNS, plan.Namespace, info.Deployment)
	// Unset, the grace is Kubernetes' default.
	if grace := parts.gracePeriod; ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds) < grace {
		rec.GracePeriod = ptr.To(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, -1))
		pod.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
	}
	if parts.hostPID && !pod.Spec.HostPID {
		rec.HostPID = ptr.To(false)
		pod.Spec.HostPID = true
	}

	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[names.LabelInstanceIndex] = strconv.Itoa(plan.Instance.Index)
	if plan.Instance.AZ != "" {
		pod.Labels[names.LabelAZ] = names.LabelValue(plan.Instance.AZ)
	}
	for _, l := range info.AliasLabels {
		pod.Labels[l] = "true"
	}
	rec.Gated = plan.Held && hold(pod)
	data, err := json.Marshal(rec)
	if err != nil {
		return Added{}, err
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[names.AnnotationInjected] = string(data)
	return Added{InitContainers: rec.InitContainers, Containers: rec.Containers, Volumes: rec.Volumes}, nil
}

// Parts are what an injection adds that depends on its plan only (the
// configuration version, the instance, the settings), not on the pod.
// They are read-only once built: the pods of an instance share them.
type Parts struct {
	// The injected init containers, setup containers (first of the
	// containers: the kubelet starts them in order), process containers
	// and volumes.
	inits, setup, containers []corev1.Container
	volumes                  []corev1.Volume
	initNames, volumeNames   []string
	gracePeriod              int64
	hostPID                  bool
	// store is the store of a group without a persistent disk, for a pod
	// without a store volume of its own; nil when the jobs need none.
	store *corev1.Volume
	// denials are the plan's, in the order Mutate meets them.
	denials []partDenial
}

// Size is how many containers and volumes the parts hold.
func (p *Parts) Size() int {
	return len(p.inits) + len(p.setup) + len(p.containers) + len(p.volumes)
}

// partDenial is a denial of every pod, or, with without set, of a pod
// without that volume (the store, a named disk) only.
type partDenial struct {
	*Denial
	without string
}

// Added names what an injection added as Build built it: its init
// containers, the containers it appended (not the user's it completed), its
// volumes.
type Added struct {
	InitContainers, Containers, Volumes []string
}

// Build makes the parts of plan's injection.
func Build(plan Plan) *Parts {
	parts := &Parts{}
	info := plan.Info
	images := map[string]string{}
	for _, r := range info.Releases {
		images[r.Name] = r.Image
	}
	for _, j := range info.Jobs {
		if images[j.Release] == "" {
			parts.denials = append(parts.denials, partDenial{Denial: deny(ReasonReleaseImageUnknown, "job '%s' of instance group '%s': release '%s' has no image; set `image` on the release in the manifest, or url, version and a stemcell", j.Name, info.InstanceGroup, j.Release)})
			return parts
		}
		if j.PersistentDisk {
			parts.denials = append(parts.denials, partDenial{without: VolumeStore, Denial: deny(ReasonNoPersistentDisk, "job '%s' of instance group '%s' needs a persistent disk: add a volumeClaimTemplate named '%s' to the StatefulSet", j.Name, info.InstanceGroup, VolumeStore)})
		}
	}

	var volumes []corev1.Volume
	var inits []corev1.Container
	if plan.Settings.ReleaseJobs == ReleaseJobsImage {
		for _, r := range info.Releases {
			volumes = append(volumes, corev1.Volume{Name: releaseVolume(r.Name), VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: r.Image}}})
		}
		volumes = append(volumes, corev1.Volume{Name: contract.BinVolume, VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: plan.Settings.OperatorImage}}})
	} else {
		volumes = append(volumes, emptyDir(VolumeAllReleases))
		for _, r := range info.Releases {
			inits = append(inits, CopyContainer(r.Name, r.Image, VolumeAllReleases))
		}
		volumes = append(volumes, emptyDir(contract.BinVolume))
	}
	volumes = append(volumes, emptyDir(VolumeJobs), emptyDir(VolumeData), emptyDir(VolumeSys), emptyDir(contract.StateVolume), emptyDir(contract.PlanVolume), desiredVolume(),
		corev1.Volume{Name: VolumeResolved, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: info.ResolvedSecret}}})

	containers, extraVolumes, instance, denials := processContainers(plan, images)
	parts.denials = append(parts.denials, denials...)
	if len(denials) > 0 && denials[len(denials)-1].without == "" {
		return parts
	}
	setupInits, setup := setupContainers(plan, images, instance)
	inits = append(inits, setupInits...)
	if len(setup) > 0 {
		probeThroughSetup(containers, instance)
	}
	instanceBPM := info.Instance(plan.Instance.Index)
	configs := instanceBPM.Jobs
	volumes = append(volumes, extraVolumes...)
	for _, j := range info.Jobs {
		if len(configs[j.Name].Processes) == 0 && slices.Contains(j.Scripts, contract.Run) && errandGroup(info) {
			// An errand group's job without BPM processes runs its bin/run.
			c := jobContainer(j.Name+"-run", images[j.Release], j)
			c.Command = []string{"/var/vcap/jobs/" + j.Name + "/bin/run"}
			c.Env = envList(bpm.DefaultEnv(j.Name))
			c.SecurityContext = asUser(Hardened(nil), VcapUID)
			containers = append(containers, c)
		}
	}
	containers = append(containers, errandContainers(info, instanceBPM, images, plan.Settings)...)
	for _, c := range inits {
		parts.initNames = append(parts.initNames, c.Name)
	}
	for _, v := range volumes {
		parts.volumeNames = append(parts.volumeNames, v.Name)
	}
	parts.denials = append(parts.denials, mountNamedDisks(info, inits, setup, containers)...)
	if info.EphemeralStore {
		parts.store = ephemeralStore(parts, info.EphemeralDiskMB)
	}
	parts.inits, parts.setup, parts.containers, parts.volumes = inits, setup, containers, volumes
	parts.gracePeriod = gracePeriod(plan)
	parts.hostPID = hostPID(configs)
	return parts
}

// ephemeralStore takes the store denials of a group without a persistent
// disk out of parts and returns the store its jobs get instead: an
// emptyDir, as BPM makes /var/vcap/store/<job> on a VM's own disk when it
// has none, bounded by the group's ephemeral disk when the manifest gives
// one (bpm.WarnEphemeralStore says its data lives as long as the pod).
// nil when no job needs a store.
func ephemeralStore(parts *Parts, ephemeralMB int) *corev1.Volume {
	n := len(parts.denials)
	parts.denials = slices.DeleteFunc(parts.denials, func(d partDenial) bool { return d.without == VolumeStore })
	if len(parts.denials) == n {
		return nil
	}
	v := emptyDir(VolumeStore)
	if ephemeralMB > 0 {
		v.EmptyDir.SizeLimit = resource.NewQuantity(int64(ephemeralMB)<<20, resource.BinarySI)
	}
	return &v
}

// setupContainers are the instance's setup steps, render then pre-start,
// as init containers and as containers beside the processes.
// The setup runs beside the processes, whose launchers wait for it, so the
// kubelet starts every container at once rather than each init container
// after the previous one ended. Render needs the launcher installed first
// where it is copied; an errand group's pod runs to completion, which
// containers waiting beside it would hold up.
func setupContainers(plan Plan, images map[string]string, instance contract.Instance) (inits, beside []corev1.Container) {
	besideProcesses := !errandGroup(plan.Info)
	renderBeside := besideProcesses && plan.Settings.ReleaseJobs == ReleaseJobsImage
	preStarts := preStartContainers(plan.Info, images, plan.Settings, besideProcesses)
	for _, c := range preStarts {
		instance.PreStarts = append(instance.PreStarts, c.Name)
	}
	render := renderContainer(plan, instance, renderBeside)
	if renderBeside {
		beside = append(beside, render)
	} else {
		inits = append(inits, render)
	}
	if besideProcesses {
		beside = append(beside, preStarts...)
	} else {
		inits = append(inits, preStarts...)
	}
	if len(beside) > 0 {
		// The pod is not ready before its setup ended. The gate answers
		// the process containers' probes too, from the launchers' files.
		gate := &beside[len(beside)-1]
		gate.ReadinessProbe = setupProbe()
		gate.VolumeMounts = append(gate.VolumeMounts, corev1.VolumeMount{Name: contract.StateVolume, MountPath: contract.SetupStateDir, ReadOnly: true})
		if len(gate.Command) > 0 {
			gate.Command = append(gate.Command, "--serve-setup")
		} else {
			gate.Args = append(gate.Args, "--serve-setup")
		}
	}
	return inits, beside
}

// Strip removes what an earlier injection added, restoring the user's
// containers it completed or removed. A pod without the annotation is left
// as it is.
func Strip(pod *corev1.Pod) error {
	if _, ok := pod.Annotations[names.AnnotationInjected]; !ok {
		return nil
	}
	rec, err := recordOf(pod)
	if err != nil {
		return err
	}
	pod.Spec.InitContainers = slices.DeleteFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return slices.Contains(rec.InitContainers, c.Name) })
	pod.Spec.Containers = slices.DeleteFunc(pod.Spec.Containers, func(c corev1.Container) bool { return slices.Contains(rec.Containers, c.Name) })
	for _, orig := range rec.Completed {
		if i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == orig.Name }); i >= 0 {
			pod.Spec.Containers[i] = orig
		}
	}
	if p := rec.Placeholder; p != nil {
		// Back where it was among the user's containers, which the deletion
		// above left in their order; clamped, as anyone can write the
		// annotation.
		i := min(max(p.Index, 0), len(pod.Spec.Containers))
		pod.Spec.Containers = slices.Insert(pod.Spec.Containers, i, p.Container)
	}
	pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return slices.Contains(rec.Volumes, v.Name) })
	restoreDNS(pod, rec.DNS)
	if rec.GracePeriod != nil {
		pod.Spec.TerminationGracePeriodSeconds = rec.GracePeriod
		if *rec.GracePeriod < 0 {
			pod.Spec.TerminationGracePeriodSeconds = nil
		}
	}
	if rec.HostPID != nil {
		pod.Spec.HostPID = *rec.HostPID
	}
	if rec.DefaultContainer {
		delete(pod.Annotations, annotationDefaultContainer)
	}
	if rec.Gated {
		Ungate(pod)
	}
	delete(pod.Annotations, names.AnnotationInjected)
	delete(pod.Labels, names.LabelInstanceIndex)
	delete(pod.Labels, names.LabelAZ)
	maps.DeleteFunc(pod.Labels, func(k, _ string) bool { return strings.HasPrefix(k, names.LabelAliasPrefix) })
	return nil
}

// recordOf reads the pod's injected annotation.
func recordOf(pod *corev1.Pod) (record, error) {
	var rec record
	if err := json.Unmarshal([]byte(pod.Annotations[names.AnnotationInjected]), &rec); err != nil {
		return rec, fmt.Errorf("annotation %s: %w", names.AnnotationInjected, err)
	}
	return rec, nil
}

// placeholder is a removed placeholder container and its index among the
// user's containers.
type placeholder struct {
	Index     int              `json:"index"`
	Container corev1.Container `json:"container"`
}

// removePlaceholder removes the container the pod's placeholder annotation
// names when no injected container has its name: left in the pod, it would
// run its image's own command beside the process containers, and exit and
// restart forever. A pod needs a container, so without any injected
// container it stays.
func removePlaceholder(pod *corev1.Pod, injected []corev1.Container) *placeholder {
	name, ok := pod.Annotations[names.AnnotationPlaceholderContainer]
	if !ok || len(injected) == 0 || slices.ContainsFunc(injected, func(c corev1.Container) bool { return c.Name == name }) {
		return nil
	}
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	p := &placeholder{Index: i, Container: pod.Spec.Containers[i]}
	pod.Spec.Containers = slices.Delete(pod.Spec.Containers, i, i+1)
	return p
}

// renderContainer renders the jobs and writes the instance's part of the
// process containers' plan; where the release jobs are copied, it installs
// the launcher too. Beside the processes, it holds after rendering.
func renderContainer(plan Plan, instance contract.Instance, beside bool) corev1.Container {
	info, inst := plan.Info, plan.Instance
	fieldEnv := func(name, field string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: field}}}
	}
	c := corev1.Container{
		Name:  RenderContainer,
		Image: plan.Settings.OperatorImage,
		Args:  []string{"render", "--plan-dir", contract.PlanDir},
		Env: []corev1.EnvVar{
			{Name: contract.EnvIndex, Value: strconv.Itoa(inst.Index)},
			{Name: "BOSH_INJECTOR_AZ", Value: inst.AZ},
			{Name: "BOSH_INJECTOR_BOOTSTRAP", Value: strconv.FormatBool(inst.Bootstrap)},
			{Name: "BOSH_INJECTOR_DEPLOYMENT", Value: info.Deployment},
			{Name: "BOSH_INJECTOR_INSTANCE_GROUP", Value: info.InstanceGroup},
			fieldEnv(contract.EnvNamespace, "metadata.namespace"),
			fieldEnv(contract.EnvPodIP, "status.podIP"),
			{Name: contract.EnvResolvedDigest, Value: plan.ResolvedDigest},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: VolumeJobs, MountPath: "/var/vcap/jobs"},
			{Name: VolumeData, MountPath: "/var/vcap/data"},
			{Name: VolumeSys, MountPath: "/var/vcap/sys"},
			{Name: VolumeResolved, MountPath: ResolvedDir, ReadOnly: true},
			{Name: contract.PlanVolume, MountPath: contract.PlanDir},
		},
		// Rendered files and directories belong to vcap, as the processes
		// that use them.
		SecurityContext:          asUser(Hardened(nil), VcapUID),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if plan.Settings.ReleaseJobs == ReleaseJobsImage {
		var mounts []corev1.VolumeMount
		for _, r := range info.Releases {
			mounts = append(mounts, corev1.VolumeMount{Name: releaseVolume(r.Name), MountPath: path.Join(AllReleasesDir, "jobs-src", r.Name),
				SubPath: imageJobsSubPath, ReadOnly: true})
		}
		c.VolumeMounts = append(append(mounts, c.VolumeMounts...), binMount(plan.Settings))
	} else {
		c.VolumeMounts = slices.Insert(c.VolumeMounts, 0, corev1.VolumeMount{Name: VolumeAllReleases, MountPath: AllReleasesDir, ReadOnly: true})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: contract.BinVolume, MountPath: contract.BinDir})
		c.Args = append(c.Args, "--install-launcher", contract.BinDir)
	}
	if beside {
		c.Args = append(c.Args, "--hold")
	}
	if len(instance.Containers) > 0 {
		// Only the launcher reads it: an errand's bin/run needs none.
		c.Env = append(c.Env, corev1.EnvVar{Name: contract.EnvInstance, Value: instance.Encode()})
	}
	return c
}

// binMount mounts the launcher read-only: from the operator image's volume
// where the release jobs are image volumes, else as render copied it.
func binMount(s Settings) corev1.VolumeMount {
	m := corev1.VolumeMount{Name: contract.BinVolume, MountPath: contract.BinDir, ReadOnly: true}
	if s.ReleaseJobs == ReleaseJobsImage {
		m.SubPath = contract.OperatorBinSubPath
	}
	return m
}

// planMount mounts the instance's plan and setup marks, read-only but for
// the setup steps.
func planMount(readOnly bool) corev1.VolumeMount {
	return corev1.VolumeMount{Name: contract.PlanVolume, MountPath: contract.PlanDir, ReadOnly: readOnly}
}

// setupProbe holds the pod unready until its setup ended: the last setup
// container answers it (runtime.ServeSetup), waiting for the end, a minute
// at most, then saying what it waits for. A readiness probe, not a startup
// probe: the kubelet asks as soon as it sees the container running rather
// than at its next period, and never restarts the container, as a VM's
// pre-start may take long.
func setupProbe() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: contract.SetupPath, Port: intstr.FromInt32(contract.SetupPort)}},
		PeriodSeconds: 30, TimeoutSeconds: contract.SetupProbeTimeout}
}

// RenderContainer is the name of the container rendering the jobs.
const RenderContainer = "render"

// SetupContainer says whether an injected container of that name runs a
// step of the instance's setup (render, a pre-start), not a process.
func SetupContainer(name string) bool {
	return name == RenderContainer || PreStartContainer(name)
}

// PreStartContainer says whether container name runs the jobs' pre-start
// scripts (`pre-start`, or `pre-start-<release>` per release image).
func PreStartContainer(name string) bool {
	return name == contract.PreStart || strings.HasPrefix(name, contract.PreStart+"-")
}

// imageJobsSubPath is where a release image holds its jobs
// (releaseimage.JobsDir, which inject does not import: the webhook does not
// build images).
const imageJobsSubPath = "var/vcap/jobs-src"

// releaseVolume is the image volume of a release's image.
func releaseVolume(release string) string {
	return "bosh-release-" + names.DNS1123LabelMax(release, 63-len("bosh-release-"))
}

// jobContainer is a container of a release image with the standard mounts
// of jobs.
func jobContainer(name, image string, jobs ...bpm.Job) corev1.Container {
	var mounts []corev1.VolumeMount
	for _, j := range jobs {
		mounts = append(mounts,
			corev1.VolumeMount{Name: VolumeJobs, MountPath: "/var/vcap/jobs/" + j.Name, SubPath: j.Name},
			corev1.VolumeMount{Name: VolumeData, MountPath: "/var/vcap/data/" + j.Name, SubPath: j.Name})
		if j.PersistentDisk {
			mounts = append(mounts, corev1.VolumeMount{Name: VolumeStore, MountPath: "/var/vcap/store/" + j.Name, SubPath: j.Name})
		}
	}
	mounts = append(mounts, corev1.VolumeMount{Name: VolumeSys, MountPath: "/var/vcap/sys"})
	return corev1.Container{Name: name, Image: image, VolumeMounts: mounts, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
}

// preStartContainers run the jobs' bin/pre-start as the agent does: all at
// once, as root, after the jobs are rendered, through the launcher (see
// runtime.Scripts.PreStart). A script needs its release's packages. With
// the release images mounted as volumes, one container named pre-start, of
// the first such job's image, runs them all: a job of another release gets
// its packages from its release's image volume, at /var/vcap/packages as on
// a VM. Copied, only its own image has them: the jobs of one image share
// one container (pre-start-<release> when there are several), which run at
// once beside the processes, else one after the other.
func preStartContainers(info *bpm.Info, images map[string]string, settings Settings, beside bool) []corev1.Container {
	var order []string
	byImage := map[string][]bpm.Job{}
	for _, j := range info.Jobs {
		if !slices.Contains(j.Scripts, contract.PreStart) {
			continue
		}
		img := images[j.Release]
		if _, ok := byImage[img]; !ok {
			order = append(order, img)
		}
		byImage[img] = append(byImage[img], j)
	}
	if len(order) > 1 && settings.ReleaseJobs == ReleaseJobsImage {
		var jobs []bpm.Job
		for _, img := range order {
			jobs = append(jobs, byImage[img]...)
		}
		c := preStartContainer(contract.PreStart, order[0], jobs, settings, beside)
		// A package is in one place, as on a VM (BOSH refuses two packages
		// of one name in an instance group): the image's own, else the
		// first job's that lists it.
		var have []string
		for _, j := range byImage[order[0]] {
			have = append(have, j.Packages...)
		}
		for _, j := range jobs {
			for _, p := range j.Packages {
				if slices.Contains(have, p) {
					continue
				}
				have = append(have, p)
				dir := "/var/vcap/packages/" + p
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: releaseVolume(j.Release), MountPath: dir, SubPath: dir[1:], ReadOnly: true})
			}
		}
		return []corev1.Container{c}
	}
	var out []corev1.Container
	for _, img := range order {
		jobs := byImage[img]
		name := contract.PreStart
		if len(order) > 1 {
			name = contract.PreStart + "-" + names.DNS1123LabelMax(jobs[0].Release, 63-len(contract.PreStart)-1)
		}
		out = append(out, preStartContainer(name, img, jobs, settings, beside))
	}
	return out
}

// preStartContainer runs the pre-start scripts of jobs in image, as the
// setup step of its name.
func preStartContainer(name, image string, jobs []bpm.Job, settings Settings, beside bool) corev1.Container {
	c := jobContainer(name, image, jobs...)
	c.Command = launcher(contract.PreStart, "--step", name)
	if beside {
		c.Command = append(c.Command, "--hold")
	}
	for _, j := range jobs {
		c.Args = append(c.Args, j.Name)
	}
	c.VolumeMounts = append(c.VolumeMounts, binMount(settings), planMount(false))
	// Pre-start prepares directories for vcap as root does.
	c.SecurityContext = asUser(Hardened(rootCaps), 0)
	return c
}

// complete fills a user's container of a process's name with what the
// injection would add; what the user set wins.
func complete(injected, user corev1.Container) corev1.Container {
	out := user
	if out.Image == "" {
		out.Image = injected.Image
	}
	// The probes and the preStop hook ask the launcher: a container the
	// user gave a command of their own gets none of them.
	launched := len(out.Command) == 0 && len(out.Args) == 0
	if launched {
		out.Command, out.Args = injected.Command, injected.Args
	}
	if out.WorkingDir == "" {
		out.WorkingDir = injected.WorkingDir
	}
	for _, e := range injected.Env {
		if !slices.ContainsFunc(out.Env, func(u corev1.EnvVar) bool { return u.Name == e.Name }) {
			out.Env = append(out.Env, e)
		}
	}
	for _, m := range injected.VolumeMounts {
		if !slices.ContainsFunc(out.VolumeMounts, func(u corev1.VolumeMount) bool { return u.MountPath == m.MountPath }) {
			out.VolumeMounts = append(out.VolumeMounts, m)
		}
	}
	if out.Resources.Limits == nil && out.Resources.Requests == nil && out.Resources.Claims == nil {
		out.Resources = injected.Resources
	}
	if out.SecurityContext == nil {
		out.SecurityContext = injected.SecurityContext
	}
	if out.ReadinessProbe == nil && launched {
		out.ReadinessProbe = injected.ReadinessProbe
	}
	if out.LivenessProbe == nil && launched {
		out.LivenessProbe = injected.LivenessProbe
	}
	if out.Lifecycle == nil && launched {
		out.Lifecycle = injected.Lifecycle
	}
	if out.TerminationMessagePolicy == "" {
		out.TerminationMessagePolicy = injected.TerminationMessagePolicy
	}
	return out
}

func envList(env map[string]string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return out
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func hasVolume(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
}

// desiredVolume projects the pod's day-2 annotations for its launchers.
func desiredVolume() corev1.Volume {
	item := func(file, annotation string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: file, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + annotation + "']"}}
	}
	return corev1.Volume{Name: contract.DesiredVolume, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
		item(contract.DesiredStateFile, names.AnnotationDesiredState),
		item(contract.SkipDrainFile, names.AnnotationSkipDrain),
	}}}}
}

package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// lifecycleScripts are the job scripts the in-pod runtime runs after the
// processes started or around their stop.
var lifecycleScripts = []string{contract.PostStart, contract.PreStop, contract.Drain, contract.PostStop, contract.DNSHealthy}

// process is a BPM process of the instance and its container's name.
type process struct {
	job       bpm.Job
	p         bpm.Process
	container string
	// monit: the process comes from the monit file of a job without bpm.yml.
	monit bool
}

// processContainers makes one container per BPM process of the instance,
// each started by the launcher with its plan, the volumes they need beyond
// the pod layout's, and the part of their plans they share.
// A denial ends them, unless it applies only to a pod without the store
// volume.
func processContainers(plan Plan, images map[string]string) ([]corev1.Container, []corev1.Volume, contract.Instance, []partDenial) {
	info := plan.Info
	instance := info.Instance(plan.Instance.Index)
	configs := instance.Jobs
	var procs []process
	var containerNames []string
	for _, j := range info.Jobs {
		if bpm.Idle(info.Lifecycle, instance, j.Name) {
			continue
		}
		for _, p := range configs[j.Name].Processes {
			name := names.DNS1123LabelMax(j.Name+"-"+p.Name, 63)
			procs = append(procs, process{job: j, p: p, container: name})
			containerNames = append(containerNames, name)
		}
		if _, ok := configs[j.Name]; !ok {
			for _, m := range instance.Monit[j.Name] {
				name := names.DNS1123LabelMax(j.Name+"-"+m, 63)
				procs = append(procs, process{job: j, p: bpm.Process{Name: m}, container: name, monit: true})
				containerNames = append(containerNames, name)
			}
		}
	}
	// Each job's scripts run in its first process's container, else in the
	// first of a job of the same release (same image, same packages).
	var jobs []contract.Job
	guests := map[string][]bpm.Job{}
	for _, j := range info.Jobs {
		var scripts []string
		for _, s := range lifecycleScripts {
			if slices.Contains(j.Scripts, s) {
				scripts = append(scripts, s)
			}
		}
		if len(scripts) == 0 {
			continue
		}
		host := slices.IndexFunc(procs, func(p process) bool { return p.job.Name == j.Name })
		if host < 0 {
			host = slices.IndexFunc(procs, func(p process) bool { return p.job.Release == j.Release })
		}
		if host < 0 {
			return nil, nil, contract.Instance{}, []partDenial{{Denial: deny(ReasonScriptsWithoutProcess, "job '%s' of instance group '%s' has %s, but no BPM process of release '%s' runs in the instance to run them in",
				j.Name, info.InstanceGroup, strings.Join(scripts, ", "), j.Release)}}
		}
		jobs = append(jobs, contract.Job{Name: j.Name, Scripts: scripts, Host: procs[host].container})
		if procs[host].job.Name != j.Name {
			guests[procs[host].container] = append(guests[procs[host].container], j)
		}
	}
	drain := 0
	if slices.ContainsFunc(jobs, func(j contract.Job) bool { return j.Has(contract.PreStop) || j.Has(contract.Drain) }) {
		drain = drainSeconds(plan.Settings)
	}

	var containers []corev1.Container
	var volumes []corev1.Volume
	var denials []partDenial
	for _, pr := range procs {
		var c corev1.Container
		var vols []corev1.Volume
		if pr.monit {
			c = monitContainer(pr, images[pr.job.Release], plan.Settings)
		} else {
			var ds []partDenial
			c, vols, ds = processContainer(info.InstanceGroup, pr, images[pr.job.Release], plan.Settings)
			if denials = append(denials, ds...); len(ds) > 0 && ds[len(ds)-1].without == "" {
				return nil, nil, contract.Instance{}, denials
			}
		}
		for _, g := range guests[pr.container] {
			c.VolumeMounts = append(c.VolumeMounts,
				corev1.VolumeMount{Name: VolumeJobs, MountPath: "/var/vcap/jobs/" + g.Name, SubPath: g.Name, ReadOnly: true},
				corev1.VolumeMount{Name: VolumeSys, MountPath: "/var/vcap/sys/log/" + g.Name, SubPath: "log/" + g.Name})
		}
		c.Env = []corev1.EnvVar{{Name: contract.EnvPlan, Value: contract.Plan{
			Job: pr.job.Name, Process: pr.p.Name, Monit: pr.monit, Container: pr.container,
		}.Encode()}}
		if needsReadiness(pr, jobs, errandGroup(info)) {
			c.ReadinessProbe = readiness()
		}
		// The hook runs the instance's pre-stop and drain scripts: without
		// any, the kubelet signals the processes at once.
		if drain > 0 {
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: launcher("pre-stop")}}}
		}
		containers = append(containers, c)
		for _, v := range vols {
			if !slices.ContainsFunc(volumes, func(u corev1.Volume) bool { return u.Name == v.Name }) {
				volumes = append(volumes, v)
			}
		}
	}
	return containers, volumes, contract.Instance{Containers: containerNames, Jobs: jobs, PersistentDiskMB: info.PersistentDiskMB, DrainSeconds: drain, Errand: errandGroup(info)}, denials
}

func launcher(args ...string) []string { return append([]string{contract.Binary}, args...) }

// launcherContainer is a container started by the launcher, with the
// mounts every process container has.
// A BPM process needs no liveness probe: the launcher waits for it and,
// as monit would, starts it again when it exits (in an errand group's pod
// its exit ends the container).
func launcherContainer(pr process, image string, settings Settings) corev1.Container {
	j := pr.job
	return corev1.Container{
		Name:                     pr.container,
		Image:                    image,
		Command:                  launcher("exec"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts: []corev1.VolumeMount{
			{Name: VolumeJobs, MountPath: "/var/vcap/jobs/" + j.Name, SubPath: j.Name, ReadOnly: true},
			{Name: VolumeSys, MountPath: "/var/vcap/sys/log/" + j.Name, SubPath: "log/" + j.Name},
			{Name: VolumeSys, MountPath: "/var/vcap/sys/run/" + j.Name, SubPath: "run/" + j.Name},
			{Name: contract.StateVolume, MountPath: contract.StateDir},
			{Name: contract.DesiredVolume, MountPath: contract.DesiredDir, ReadOnly: true},
			binMount(settings),
			planMount(true),
		},
	}
}

// readiness is the probe of a container whose process may run before the
// agent would call it running: the runtime's Ready.
func readiness() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: launcher("probe", "ready")}},
		PeriodSeconds: 5, TimeoutSeconds: 10}
}

// probeThroughSetup moves the readiness probe of each BPM process container
// to the setup server (the last setup container, runtime.ServeSetup): the
// kubelet's HTTP request replaces a process exec'd in the container every
// period, the costliest part of a node's work for an idle instance. A
// container hosting a job's bin/dns/healthy keeps its exec probe, which
// runs the script there, and so does a monit process's, whose daemon only
// its container sees.
func probeThroughSetup(containers []corev1.Container, instance contract.Instance) {
	for i := range containers {
		c := &containers[i]
		if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil || contract.ChecksDNSHealth(instance.Jobs, c.Name) {
			continue
		}
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == contract.EnvPlan })
		if i < 0 {
			continue
		}
		plan, err := contract.DecodePlan(c.Env[i].Value)
		if err != nil || plan.Monit {
			continue
		}
		c.ReadinessProbe.Exec = nil
		c.ReadinessProbe.HTTPGet = &corev1.HTTPGetAction{Path: contract.ReadyURL(plan), Port: intstr.FromInt32(contract.SetupPort)}
	}
}

// needsReadiness says whether a process container's readiness is more than
// its launcher running: in a service instance always, as the launcher
// starts an exited process again in its container (the container runs
// while the process does not, which the agent reports failing); in an
// errand group's, whose process's exit ends its container, when a BPM
// pre_start hook runs first, a monit start program daemonizes, or the
// instance's post-start scripts or the dns/healthy of a job the container
// hosts must pass. Any other container needs no probe (an exec each period,
// and its bytes in every admission's patch).
func needsReadiness(pr process, jobs []contract.Job, errand bool) bool {
	return !errand || pr.monit || (pr.p.Hooks != nil && pr.p.Hooks.PreStart != "") ||
		slices.ContainsFunc(jobs, func(j contract.Job) bool { return j.Has(contract.PostStart) }) || contract.ChecksDNSHealth(jobs, pr.container)
}

// monitContainer runs a process of a job without bpm.yml from its monit
// file. Monit runs start programs as root with the job's whole data
// directory; so does the container, with the capabilities root needs to
// prepare files for vcap, drop privileges and bind low ports.
func monitContainer(pr process, image string, settings Settings) corev1.Container {
	c := launcherContainer(pr, image, settings)
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeData, MountPath: "/var/vcap/data/" + pr.job.Name, SubPath: pr.job.Name})
	// The start program daemonizes: the launcher follows the pid file it
	// writes, which the probe checks too, as monit's own checks do.
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: launcher("probe", "alive")}},
		PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3}
	c.SecurityContext = asUser(Hardened(monitCaps), 0)
	return c
}

// monitCaps add binding ports below 1024 to rootCaps: monit runs its start
// programs as root, which daemons use to listen on such ports.
var monitCaps = capabilities(append(slices.Clone(launcherCaps), "NET_BIND_SERVICE"))

// hookCaps are what the launcher's root gets for a BPM pre_start hook
// beyond launcherCaps: BPM runs the hook as root on the VM, outside the
// process's confinement (gorouter's hook runs setcap, which needs SETFCAP).
// A pod gives the hook the capabilities a container runtime gives root by
// default, not the VM's all (bpm.WarnHookCapabilities says so); the process
// itself still gets only its BPM capabilities, ambient, as vcap.
var hookCaps = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// processContainer maps a BPM process onto a container started by the
// launcher, which reads the rest of bpm.yml at run time.
// Mounting the store volume is denied to a pod without it.
func processContainer(group string, pr process, image string, settings Settings) (corev1.Container, []corev1.Volume, []partDenial) {
	j, p := pr.job, pr.p
	c := launcherContainer(pr, image, settings)
	// BPM mounts the job's tmp always and its whole data directory only with
	// ephemeral_disk.
	if p.EphemeralDisk {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeData, MountPath: "/var/vcap/data/" + j.Name, SubPath: j.Name})
	} else {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeData, MountPath: "/var/vcap/data/" + j.Name + "/tmp", SubPath: j.Name + "/tmp"})
	}
	if p.PersistentDisk {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeStore, MountPath: "/var/vcap/store/" + j.Name, SubPath: j.Name})
	}
	var volumes []corev1.Volume
	var denials []partDenial
	for _, v := range p.AdditionalVolumes {
		m, ok := additionalMount(v)
		if !ok {
			continue
		}
		if m.Name == VolumeStore {
			denials = append(denials, partDenial{without: VolumeStore, Denial: deny(ReasonNoPersistentDisk, "job '%s' of instance group '%s' mounts %s: add a volumeClaimTemplate named '%s' to the StatefulSet", j.Name, group, v.Path, VolumeStore)})
		}
		c.VolumeMounts = append(c.VolumeMounts, m)
	}
	if p.Unsafe != nil {
		for _, v := range p.Unsafe.UnrestrictedVolumes {
			// BPM mounts a glob's matches as they are at each start, and
			// creates none: the pod volume holding them all (the jobs
			// volume for route_registrar's /var/vcap/jobs/*/config/...)
			// shows every match as the process looks. Gathering refuses
			// globs over another directory (bpm.CheckPodVolumes).
			if root, ok := bpm.GlobRoot(v.Path); ok {
				v.Path = root
				if m, ok := additionalMount(v); ok {
					c.VolumeMounts = mergeMount(c.VolumeMounts, m)
				}
				continue
			}
			if m, ok := additionalMount(v); ok {
				c.VolumeMounts = append(c.VolumeMounts, m)
				continue
			}
			// Outside /var/vcap BPM mounts the VM's own path: the node's.
			sum := sha256.Sum256([]byte(v.Path))
			name := "bosh-host-" + hex.EncodeToString(sum[:])[:12]
			volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: v.Path}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: v.Path, ReadOnly: !v.Writable})
		}
	}
	if p.Limits != nil && p.Limits.Memory != nil {
		if bytes, err := bpm.ParseMemory(*p.Limits.Memory); err == nil {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(bytes, resource.BinarySI)}
		}
	}
	// The launcher starts as root and runs the process as vcap with its
	// capabilities ambient; privileged processes stay root, as under BPM.
	if p.Privileged() {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](0)}
		return c, volumes, denials
	}
	caps := capabilities(append(slices.Clone(launcherCaps), p.Capabilities...))
	if p.Hooks != nil && p.Hooks.PreStart != "" {
		caps = capabilities(append(append(slices.Clone(launcherCaps), p.Capabilities...), hookCaps...))
	}
	c.SecurityContext = asUser(Hardened(caps), 0)
	// Kubernetes refuses no_new_privs together with SYS_ADMIN.
	if slices.Contains(caps, "SYS_ADMIN") {
		c.SecurityContext.AllowPrivilegeEscalation = nil
	}
	return c, volumes, denials
}

// mergeMount adds m to mounts unless a mount at its path is there already
// (two globs under one directory), which then is writable if either is.
func mergeMount(mounts []corev1.VolumeMount, m corev1.VolumeMount) []corev1.VolumeMount {
	i := slices.IndexFunc(mounts, func(o corev1.VolumeMount) bool { return o.MountPath == m.MountPath })
	if i < 0 {
		return append(mounts, m)
	}
	mounts[i].ReadOnly = mounts[i].ReadOnly && m.ReadOnly
	return mounts
}

// capabilities are BPM capability names (CAP_ prefix optional, any case)
// as Kubernetes names them, sorted and without duplicates.
func capabilities(bpmNames []string) []corev1.Capability {
	var caps []corev1.Capability
	for _, name := range bpmNames {
		capName := corev1.Capability(strings.TrimPrefix(strings.ToUpper(name), "CAP_"))
		if !slices.Contains(caps, capName) {
			caps = append(caps, capName)
		}
	}
	slices.Sort(caps)
	return caps
}

// additionalMount maps a BPM volume under /var/vcap onto the pod volume
// holding that directory: data, store, sys and jobs are the pod's own;
// packages are in every release image already (no mount); any other
// directory of /var/vcap is kept under bosh-data's .vcap/, so the instance's
// containers share it as processes on one VM do.
func additionalMount(v bpm.Volume) (corev1.VolumeMount, bool) {
	rest, ok := strings.CutPrefix(v.Path, "/var/vcap/")
	if !ok {
		return corev1.VolumeMount{}, false
	}
	m := corev1.VolumeMount{MountPath: v.Path, ReadOnly: !v.Writable}
	top, sub, _ := strings.Cut(rest, "/")
	switch top {
	case "data":
		m.Name, m.SubPath = VolumeData, sub
	case "store":
		m.Name, m.SubPath = VolumeStore, sub
	case "sys":
		m.Name, m.SubPath = VolumeSys, sub
	case "jobs":
		m.Name, m.SubPath = VolumeJobs, sub
	case "packages":
		return corev1.VolumeMount{}, false
	default:
		m.Name, m.SubPath = VolumeData, ".vcap/"+rest
	}
	return m, true
}

func drainSeconds(s Settings) int {
	if s.DrainSeconds > 0 {
		return s.DrainSeconds
	}
	return DefaultDrainSeconds
}

// gracePeriod is the termination grace an instance needs: pre-stop and
// drain, BPM's wait for the processes, post-stop.
func gracePeriod(plan Plan) int64 {
	g := contract.BPMStopTimeout + contract.BPMQuitGrace
	var drains, postStops bool
	for _, j := range plan.Info.Jobs {
		drains = drains || slices.Contains(j.Scripts, contract.PreStop) || slices.Contains(j.Scripts, contract.Drain)
		postStops = postStops || slices.Contains(j.Scripts, contract.PostStop)
	}
	if drains {
		g += drainSeconds(plan.Settings)
	}
	if postStops {
		g += postStopSeconds
	}
	return int64(g)
}

// hostPID says whether a process asks for the host's PID namespace, which
// in a pod is the node's.
func hostPID(configs map[string]bpm.Config) bool {
	for _, c := range configs {
		for _, p := range c.Processes {
			if p.Unsafe != nil && p.Unsafe.HostPidNamespace {
				return true
			}
		}
	}
	return false
}

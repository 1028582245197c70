// Package contract is what the injected pod and the in-pod runtime agree on:
// where the launcher binary is, where the instance's lifecycle state lives,
// and the plan the webhook hands every process container (its own part in
// its environment, the instance's part once through the render container).
// inject writes it into the pod; the render command (gather/render/rendering) and
// inject/runtime read it inside the pod.
package contract

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

const (
	// BinVolume holds the static bosh-injector binary, the launcher, at
	// BinDir: an image volume of the operator image (its OperatorBinSubPath)
	// where the node has image volumes, else an emptyDir the render init
	// container copies the binary into. Every container mounts it
	// read-only, so the job's own processes cannot change what the root
	// launcher and hooks run.
	BinVolume = "bosh-injector-bin"
	// BinDir is where BinVolume is mounted and Binary the launcher in it.
	BinDir = "/var/vcap/bosh-injector/bin"
	Binary = BinDir + "/bosh-injector"
	// OperatorBinSubPath is the operator image's directory holding the
	// binary (the Dockerfile's), under the same name as in BinDir.
	OperatorBinSubPath = "usr/local/bin"

	// PlanVolume is the emptyDir, mounted at PlanDir, where render writes
	// the instance's part of the plan (InstanceFile) and the setup steps
	// (render, pre-start) mark their end; read-only in the process
	// containers.
	PlanVolume = "bosh-injector-plan"
	PlanDir    = "/var/vcap/bosh-injector/plan"

	// StateVolume is the emptyDir, mounted at StateDir in every process
	// container, where launchers, hooks and probes of one instance meet:
	// who runs, which scripts ran and how. A volume of its own, not a
	// subPath of bosh-sys: the kubelet prepares every subPath mount of
	// every container, one container after another, at pod start.
	StateVolume = "bosh-injector-state"
	StateDir    = "/var/vcap/sys/run/bosh-injector"
	// SetupStateDir is where the last setup container, which answers the
	// process containers' probes, reads StateVolume: outside
	// /var/vcap/sys, where a mount point's directories would be root's
	// and the setup (as vcap) could not create the jobs' own.
	SetupStateDir = "/var/vcap/bosh-injector/state"

	// EnvPlan holds a process container's own part of its Plan (not its
	// Instance); preStop hooks and exec probes inherit it.
	EnvPlan = "BOSH_INJECTOR_RUNTIME"
	// EnvInstance holds the JSON Instance on the render container, which
	// writes it as InstanceFile in PlanDir (the render command's flag
	// --instance, from the environment).
	EnvInstance  = "BOSH_INJECTOR_INSTANCE"
	InstanceFile = "instance.json"

	// The webhook sets these on the render container: the instance's
	// index, the pod's IP and namespace, and EnvResolvedDigest, the digest
	// (secretdata.Digest) of the resolved Secret the webhook accepted for
	// the pod, so a Secret replaced between admission and mount is refused,
	// not rendered.
	EnvIndex          = "BOSH_INJECTOR_INSTANCE_INDEX"
	EnvPodIP          = "POD_IP"
	EnvNamespace      = "POD_NAMESPACE"
	EnvResolvedDigest = "BOSH_INJECTOR_RESOLVED_SHA256"

	// BPMStopTimeout is how long BPM waits for a process after its shutdown
	// signal before SIGQUIT; BPMQuitGrace is the wait after SIGQUIT before
	// the process is killed (bpm stop, runc lifecycle).
	BPMStopTimeout = 20
	BPMQuitGrace   = 2
)

// Lifecycle scripts, by their name under a job's bin/.
const (
	PostStart  = "post-start"
	PreStop    = "pre-stop"
	Drain      = "drain"
	PostStop   = "post-stop"
	DNSHealthy = "dns/healthy"
	// Run is an errand job's script.
	Run = "run"
)

// Launcher commands of a colocated errand: Sleep holds the errand's
// container; run-errand execs Errand JOB in it, which runs the job's
// bin/run as the agent runs an errand.
const (
	Sleep  = "sleep"
	Errand = "errand"
)

// Plan is what one process container's launcher, hooks and probes need to
// know of the instance. It holds no rendered value: those are read from the
// rendered bpm.yml at run time.
type Plan struct {
	// Job and Process name the BPM process this container runs.
	Job     string `json:"job"`
	Process string `json:"process"`
	// Monit says the process comes from the job's monit file (a job
	// without bpm.yml), not from bpm.yml.
	Monit bool `json:"monit,omitempty"`
	// Container is this container's name.
	Container string `json:"container"`
	// Instance is what every process container shares. It is not in
	// EnvPlan: written once per pod rather than into each of n containers,
	// a pod's size stays linear in its processes (Load reads it).
	Instance `json:"-"`
}

// Instance is the part of the Plan common to an instance's process
// containers. The render container writes it into PlanDir (InstanceFile)
// from EnvInstance.
type Instance struct {
	// Containers are every process container of the instance: post-start
	// waits for all of them.
	Containers []string `json:"containers"`
	// PreStarts are the instance's pre-start steps (the containers running
	// the jobs' bin/pre-start), which end before any process starts.
	PreStarts []string `json:"pre_starts,omitempty"`
	// Jobs are the instance's jobs with lifecycle scripts, in manifest
	// order, each with the container that runs them.
	Jobs []Job `json:"jobs,omitempty"`
	// PersistentDiskMB is the instance's persistent disk, which drain
	// scripts see in BOSH_JOB_STATE.
	PersistentDiskMB int `json:"persistent_disk_mb,omitempty"`
	// DrainSeconds bounds pre-stop and drain of the whole instance.
	DrainSeconds int `json:"drain_seconds,omitempty"`
	// Errand says the instance is an errand group's (lifecycle: errand):
	// its pod runs to completion, so a process that exits ends its
	// container rather than being started again as monit starts a service
	// instance's.
	Errand bool `json:"errand,omitempty"`
}

// ChecksDNSHealth says whether container runs a job's bin/dns/healthy of
// jobs: only it can, so its readiness probe runs in it.
func ChecksDNSHealth(jobs []Job, container string) bool {
	return slices.ContainsFunc(jobs, func(j Job) bool { return j.Host == container && j.Has(DNSHealthy) })
}

// Job is a job's lifecycle scripts and the container that runs them.
type Job struct {
	Name    string   `json:"name"`
	Scripts []string `json:"scripts"`
	Host    string   `json:"host"`
}

// Has says whether the job ships script.
func (j Job) Has(script string) bool { return slices.Contains(j.Scripts, script) }

// Hosted are the jobs whose scripts this container runs.
func (p Plan) Hosted() []Job {
	var out []Job
	for _, j := range p.Jobs {
		if j.Host == p.Container {
			out = append(out, j)
		}
	}
	return out
}

// Encode is the Plan as EnvPlan's value.
func (p Plan) Encode() string {
	data, _ := json.Marshal(p) // a Plan always encodes
	return string(data)
}

// Encode is the Instance as EnvInstance's value.
func (in Instance) Encode() string {
	data, _ := json.Marshal(in) // an Instance always encodes
	return string(data)
}

// WriteInstance writes encoded, EnvInstance's value, as InstanceFile in dir
// (PlanDir), after checking it decodes; a reader sees the old file or the
// new one.
func WriteInstance(dir, encoded string) error {
	var in Instance
	if err := json.Unmarshal([]byte(encoded), &in); err != nil {
		return fmt.Errorf("%s: %w", EnvInstance, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+InstanceFile+".tmp")
	if err := os.WriteFile(tmp, []byte(encoded), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, InstanceFile))
}

// Load reads this container's Plan from EnvPlan and the instance's part
// from InstanceFile in dir (PlanDir).
func Load(dir string) (Plan, error) {
	raw := os.Getenv(EnvPlan)
	if raw == "" {
		return Plan{}, fmt.Errorf("%s is not set: this command runs in a process container bosh-injector injected", EnvPlan)
	}
	p, err := DecodePlan(raw)
	if err != nil {
		return p, err
	}
	in, err := loadInstance(dir)
	p.Instance = in
	return p, err
}

// DecodePlan reads EnvPlan's value, without the instance's part.
func DecodePlan(encoded string) (Plan, error) {
	var p Plan
	if err := json.Unmarshal([]byte(encoded), &p); err != nil {
		return p, fmt.Errorf("%s: %w", EnvPlan, err)
	}
	return p, nil
}

// loadInstance reads InstanceFile in dir.
func loadInstance(dir string) (Instance, error) {
	var in Instance
	file := filepath.Join(dir, InstanceFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return in, fmt.Errorf("reading the instance's plan, which the render container writes: %w", err)
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return in, fmt.Errorf("%s: %w", file, err)
	}
	return in, nil
}

// PreStart is the script the pre-start step runs for every job that ships
// it (the launcher's command of that name, and the step's container).
const PreStart = "pre-start"

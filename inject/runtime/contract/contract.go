// Package contract is what the injected pod and the in-pod runtime agree on:
// where the launcher binary is, where the instance's lifecycle state lives,
// and the plan the webhook hands every process container (its own part in
// its environment, the instance's part once through the render container).
// inject writes it into the pod; the render command (gather/rendering) and
// inject/runtime read it inside the pod.
package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

const (
	// BinVolume is the emptyDir the render init container copies the
	// static bosh-injector binary and the instance's plan (InstanceFile)
	// into; every process container mounts it read-only, so the job's own
	// processes cannot change what the root launcher and hooks run.
	BinVolume = "bosh-injector-bin"
	// BinDir is where BinVolume is mounted and Binary the launcher in it.
	BinDir = "/var/vcap/bosh-injector/bin"
	Binary = BinDir + "/bosh-injector"

	// StateSubPath is the directory of the bosh-sys volume, mounted at
	// StateDir in every process container, where launchers, hooks and
	// probes of one instance meet: who runs, which scripts ran and how.
	StateSubPath = "run/bosh-injector"
	StateDir     = "/var/vcap/sys/run/bosh-injector"

	// EnvPlan holds a process container's own part of its Plan (not its
	// Instance); preStop hooks and exec probes inherit it.
	EnvPlan = "BOSH_INJECTOR_RUNTIME"
	// EnvInstance holds the JSON Instance on the render init container,
	// which writes it as InstanceFile next to the launcher in BinDir (the
	// render command's flag --instance, from the environment).
	EnvInstance  = "BOSH_INJECTOR_INSTANCE"
	InstanceFile = "instance.json"

	// The webhook sets these on the render init container: the instance's
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
// containers. The render init container writes it into BinDir
// (InstanceFile) from EnvInstance.
type Instance struct {
	// Containers are every process container of the instance: post-start
	// waits for all of them.
	Containers []string `json:"containers"`
	// Jobs are the instance's jobs with lifecycle scripts, in manifest
	// order, each with the container that runs them.
	Jobs []Job `json:"jobs,omitempty"`
	// PersistentDiskMB is the instance's persistent disk, which drain
	// scripts see in BOSH_JOB_STATE.
	PersistentDiskMB int `json:"persistent_disk_mb,omitempty"`
	// DrainSeconds bounds pre-stop and drain of the whole instance.
	DrainSeconds int `json:"drain_seconds,omitempty"`
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
// (BinDir), after checking it decodes; a reader sees the old file or the
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
// from InstanceFile in dir (BinDir).
func Load(dir string) (Plan, error) {
	var p Plan
	raw := os.Getenv(EnvPlan)
	if raw == "" {
		return p, fmt.Errorf("%s is not set: this command runs in a process container bosh-injector injected", EnvPlan)
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return p, fmt.Errorf("%s: %w", EnvPlan, err)
	}
	file := filepath.Join(dir, InstanceFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) && legacy(raw) {
		// A pod injected before the plan was split carries it whole in
		// EnvPlan; its render wrote no file.
		data, err = []byte(raw), nil
	}
	if err != nil {
		return p, fmt.Errorf("reading the instance's plan, which the render init container writes: %w", err)
	}
	if err := json.Unmarshal(data, &p.Instance); err != nil {
		return p, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// legacy says whether raw, EnvPlan's value, holds the whole plan, with the
// instance's containers.
func legacy(raw string) bool {
	var whole struct {
		Containers json.RawMessage `json:"containers"`
	}
	return json.Unmarshal([]byte(raw), &whole) == nil && whole.Containers != nil
}

// PreStart is the script the pre-start init container runs for every job
// that ships it (the launcher's command of that name).
const PreStart = "pre-start"

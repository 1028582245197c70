// Package contract is what the injected pod and the in-pod runtime agree on:
// where the launcher binary is, where the instance's lifecycle state lives,
// and the plan the webhook hands every process container. inject writes it
// into the pod; inject/runtime reads it inside the pod.
package contract

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

const (
	// BinVolume is the emptyDir the render init container copies the
	// static bosh-injector binary into; every process container mounts it.
	BinVolume = "bosh-injector-bin"
	// BinDir is where BinVolume is mounted and Binary the launcher in it.
	BinDir = "/var/vcap/bosh-injector/bin"
	Binary = BinDir + "/bosh-injector"

	// StateSubPath is the directory of the bosh-sys volume, mounted at
	// StateDir in every process container, where launchers, hooks and
	// probes of one instance meet: who runs, which scripts ran and how.
	StateSubPath = "run/bosh-injector"
	StateDir     = "/var/vcap/sys/run/bosh-injector"

	// EnvPlan holds the JSON Plan on every process container; preStop hooks
	// and exec probes inherit it.
	EnvPlan = "BOSH_INJECTOR_RUNTIME"

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
	// Container is this container's name; Containers every process
	// container of the instance (post-start waits for all of them).
	Container  string   `json:"container"`
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

// Encoder encodes the Plans of one instance's process containers, which
// differ only in their fields before Containers: the others, the n
// container names of an instance of n processes among them, are encoded
// once instead of n times.
type Encoder struct{ tail string }

// NewEncoder encodes shared's fields from Containers on.
func NewEncoder(shared Plan) Encoder {
	_, tail := shared.split()
	return Encoder{tail}
}

// Encode is p.Encode() with p's fields from Containers on the Encoder's.
func (e Encoder) Encode(p Plan) string {
	p.Containers, p.Jobs, p.PersistentDiskMB, p.DrainSeconds = nil, nil, 0, 0
	head, _ := p.split()
	return head + e.tail
}

// split cuts p's encoding before Containers: the first `,"containers":`
// is that member's, as a quote inside a string value is escaped.
func (p Plan) split() (head, tail string) {
	enc := p.Encode()
	i := strings.Index(enc, `,"containers":`)
	return enc[:i], enc[i:]
}

// FromEnv reads the Plan from EnvPlan.
func FromEnv() (Plan, error) {
	var p Plan
	raw := os.Getenv(EnvPlan)
	if raw == "" {
		return p, fmt.Errorf("%s is not set: this command runs in a process container bosh-injector injected", EnvPlan)
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return p, fmt.Errorf("%s: %w", EnvPlan, err)
	}
	return p, nil
}

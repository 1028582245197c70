package bpm

// Config is a job's bpm.yml (BPM's docs/config.md). Field names and types
// follow BPM's own config package so decoding with go-yaml v3 is as lenient
// and as strict as BPM is.
type Config struct {
	Processes []Process `yaml:"processes" json:"processes"`
}

// Process is one BPM process of a job.
type Process struct {
	Name              string            `yaml:"name" json:"name"`
	Executable        string            `yaml:"executable" json:"executable"`
	Args              []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env               map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Workdir           string            `yaml:"workdir,omitempty" json:"workdir,omitempty"`
	Hooks             *Hooks            `yaml:"hooks,omitempty" json:"hooks,omitempty"`
	Capabilities      []string          `yaml:"capabilities,omitempty" json:"capabilities,omitempty"`
	Limits            *Limits           `yaml:"limits,omitempty" json:"limits,omitempty"`
	EphemeralDisk     bool              `yaml:"ephemeral_disk,omitempty" json:"ephemeral_disk,omitempty"`
	PersistentDisk    bool              `yaml:"persistent_disk,omitempty" json:"persistent_disk,omitempty"`
	AdditionalVolumes []Volume          `yaml:"additional_volumes,omitempty" json:"additional_volumes,omitempty"`
	Unsafe            *Unsafe           `yaml:"unsafe,omitempty" json:"unsafe,omitempty"`
	ShutdownSignal    string            `yaml:"shutdown_signal,omitempty" json:"shutdown_signal,omitempty"`
}

// Hooks are scripts BPM runs around a process.
type Hooks struct {
	PreStart string `yaml:"pre_start,omitempty" json:"pre_start,omitempty"`
}

// Limits are a process's resource limits; nil means unlimited.
type Limits struct {
	Memory       *string `yaml:"memory,omitempty" json:"memory,omitempty"`
	OpenFiles    *uint64 `yaml:"open_files,omitempty" json:"open_files,omitempty"`
	Processes    *int64  `yaml:"processes,omitempty" json:"processes,omitempty"`
	CoreFileSize *uint64 `yaml:"core_file_size,omitempty" json:"core_file_size,omitempty"`
}

// Volume is an additional volume under /var/vcap.
type Volume struct {
	Path            string `yaml:"path" json:"path"`
	Writable        bool   `yaml:"writable,omitempty" json:"writable,omitempty"`
	AllowExecutions bool   `yaml:"allow_executions,omitempty" json:"allow_executions,omitempty"`
	MountOnly       bool   `yaml:"mount_only,omitempty" json:"mount_only,omitempty"`
	Shared          bool   `yaml:"shared,omitempty" json:"shared,omitempty"`
}

// Privileged says whether BPM runs p as root, with every capability
// (unsafe.privileged), rather than as vcap.
func (p Process) Privileged() bool { return p.Unsafe != nil && p.Unsafe.Privileged }

// Unsafe holds the settings that weaken a process's isolation.
type Unsafe struct {
	Privileged          bool     `yaml:"privileged,omitempty" json:"privileged,omitempty"`
	HostPidNamespace    bool     `yaml:"host_pid_namespace,omitempty" json:"host_pid_namespace,omitempty"`
	UnrestrictedVolumes []Volume `yaml:"unrestricted_volumes,omitempty" json:"unrestricted_volumes,omitempty"`
}

// Package bpm holds BOSH Process Manager configuration (bpm.yml) as BPM reads
// it, and Info, the per-instance-group document gather writes into the
// "<deployment>.bpm.<ig>-vN" Secret and the webhook reads to inject pods.
package bpm

import "slices"

// InfoKey is the Secret data key holding the JSON-encoded Info.
const InfoKey = "bpm.json"

// Info is everything the webhook needs to turn a pod into an instance of an
// instance group, without Ruby and without further API calls.
type Info struct {
	Deployment    string `json:"deployment"`
	InstanceGroup string `json:"instance_group"`
	// Instances is the manifest's total instance count of the group.
	Instances int `json:"instances"`
	// AZs are the group's availability zones in manifest order; a pod's
	// az-index label (1-based) picks one.
	AZs []string `json:"azs,omitempty"`
	// Lifecycle is "service" or "errand".
	Lifecycle string `json:"lifecycle"`
	// PersistentDiskMB is the group's persistent disk size, 0 for none.
	PersistentDiskMB int `json:"persistent_disk_mb,omitempty"`
	// EphemeralStore says a job of the group mounts /var/vcap/store but the
	// group has no persistent disk: the store is the pod's own ephemeral
	// storage, as on a VM without a disk it is the VM's. Set only then, so
	// that no other group's Info changes.
	EphemeralStore bool `json:"ephemeral_store,omitempty"`
	// EphemeralDiskMB is, with EphemeralStore, the group's
	// vm_resources.ephemeral_disk_size (0 when not given): it bounds that
	// store.
	EphemeralDiskMB int `json:"ephemeral_disk_mb,omitempty"`
	// NamedDisks are the names of the group's `persistent_disks`, which
	// the webhook mounts at names.NamedDisksDir.
	NamedDisks []string `json:"named_disks,omitempty"`
	// ResolvedSecret names the ig-resolved Secret written with this Info: the
	// render init container mounts it.
	ResolvedSecret string    `json:"resolved_secret"`
	Releases       []Release `json:"releases"`
	Jobs           []Job     `json:"jobs"`
	// Instances share a BPM configuration unless bpm.yml.erb renders
	// differently for them; each entry lists the indexes it applies to.
	BPM []InstanceBPM `json:"bpm"`
	// Rendered identifies what BPM was rendered from (the bpm.yml
	// templates, their specs, the operator build): gathering renders the
	// group again only when that changes.
	Rendered string `json:"rendered,omitempty"`
	// AliasLabels are the labels (value "true") of the BOSH DNS aliases
	// over several groups that target this group: the webhook puts them on
	// its pods so each alias's Service selects them.
	AliasLabels []string `json:"alias_labels,omitempty"`
}

// Release is a BOSH release used by the group and the image that ships it.
type Release struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Image   string `json:"image"`
}

// Job is one BOSH job of the group, in manifest order.
type Job struct {
	Name    string `json:"name"`
	Release string `json:"release"`
	// Scripts lists the lifecycle scripts the job renders, by their name
	// under bin/: "pre-start", "post-start", "drain", "run", ...
	Scripts []string `json:"scripts,omitempty"`
	// PersistentDisk is true when a BPM process of the job asks for the
	// persistent disk.
	PersistentDisk bool `json:"persistent_disk,omitempty"`
	// Packages are the packages a job with a bin/pre-start script needs
	// (its spec's): run in another release's image, the script gets them
	// from its own release's image.
	Packages []string `json:"packages,omitempty"`
}

// InstanceBPM is what BOSH starts of each job on the instances listed:
// the job's rendered bpm.yml, and what its monit files, rendered for
// these instances, check (BOSH starts only that).
type InstanceBPM struct {
	Indexes []int `json:"indexes"`
	// Jobs maps a job name to its rendered, validated bpm.yml; jobs without
	// bpm.yml are absent.
	Jobs map[string]Config `json:"jobs"`
	// Idle are the jobs whose monit files check no process: BOSH starts
	// nothing of them, whatever their bpm.yml says (an errand job, whose
	// bpm.yml configures the `bpm run` of its bin/run; a job its
	// properties disable in its monit file).
	Idle []string `json:"idle,omitempty"`
	// Monit maps a job without bpm.yml to the processes its monit files
	// check (`check process <name>`); the pod runs each through the monit
	// file's start and stop programs.
	Monit map[string][]string `json:"monit,omitempty"`
}

// Idle says whether a job of an instance (its entry of BPM) of a group of
// lifecycle starts no process: in a service group, BOSH starts only what
// a job's monit files check, so a job whose monit checks nothing runs
// none of its bpm.yml's processes and no bin/run either (an errand
// group's instance runs its jobs to completion).
func Idle(lifecycle string, instance InstanceBPM, job string) bool {
	return lifecycle != "errand" && slices.Contains(instance.Idle, job)
}

// Instance returns what BOSH starts on instance index: its entry of BPM,
// empty when the index is in none.
func (i *Info) Instance(index int) InstanceBPM {
	for _, b := range i.BPM {
		if slices.Contains(b.Indexes, index) {
			return b
		}
	}
	return InstanceBPM{}
}

// ForIndex returns the BPM configurations of instance index, or nil when the
// index is in no entry.
func (i *Info) ForIndex(index int) map[string]Config { return i.Instance(index).Jobs }

// Package instance computes the identity of BOSH instances on Kubernetes:
// index, AZ and bootstrap from a pod's ordinal and AZ
// index, a stable UUID, the per-instance and per-group Service names and
// addresses, and the director's template `spec` document.
package instance

import (
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// maxAddress is the longest DNS name.
const maxAddress = 253

// idNamespace scopes instance UUIDs (uuid v5) to bosh-injector.
var idNamespace = uuid.NewSHA1(uuid.NameSpaceDNS, []byte("bosh-injector.io"))

// Instance is one instance of an instance group.
type Instance struct {
	Index int
	// AZ is "" when the group has no AZs (the spec's az is then nil).
	AZ string
	// AZIndex is 1-based (the pod label az-index); Ordinal is the pod's
	// ordinal in its AZ's StatefulSet.
	AZIndex, Ordinal int
	Bootstrap        bool
	ID               string
	Service          string
	Address          string
}

// Index is the instance index of a pod: ordinal × AZ count + (az-index − 1),
// so scaling never renumbers existing instances.
func Index(ordinal, azIndex, azCount int) int {
	if azCount < 1 {
		azCount = 1
	}
	return ordinal*azCount + azIndex - 1
}

// Replicas is, per AZ index (0-based), how many instances of a group of
// count instances over azCount AZs run in that AZ: exactly the ordinals
// 0..replicas-1 of each AZ give every Index below count once. It is the
// director's distribution for a fresh deployment (least-used AZ first, ties
// to the first AZ), so the first count mod azCount AZs get one more.
func Replicas(count, azCount int) []int {
	azCount = max(azCount, 1)
	out := make([]int, azCount)
	for a := range out {
		out[a] = count / azCount
		if a < count%azCount {
			out[a]++
		}
	}
	return out
}

// ID is the instance's stable UUID, derived from deployment, group and index.
func ID(deployment, group string, index int) string {
	return uuid.NewSHA1(idNamespace, []byte(deployment+"/"+group+"/"+strconv.Itoa(index))).String()
}

// ServiceName is the per-instance Service name `<deployment>-<ig>-<index>`.
func ServiceName(deployment, group string, index int) string {
	return names.DNS1123Label(fmt.Sprintf("%s-%s-%d", deployment, group, index))
}

// GroupServiceName is the per-group Service name `<deployment>-<ig>`.
func GroupServiceName(deployment, group string) string {
	return names.DNS1123Label(deployment + "-" + group)
}

// Network holds what a Service address is made of.
type Network struct {
	Namespace, ClusterDomain string
}

// Address is `<service>.<namespace>.svc.<cluster-domain>` for the Service of
// the unsanitized name raw (`<deployment>-<ig>[-<index>]`). When that is
// over 253 characters the Service name is shortened further with the md5
// rule, and it is an error when even the hash cannot fit. It also returns
// the Service name used.
func (n Network) Address(raw string) (service, address string, err error) {
	suffix := "." + n.Namespace + ".svc." + n.ClusterDomain
	service = names.DNS1123Label(raw)
	if len(service)+len(suffix) <= maxAddress {
		return service, service + suffix, nil
	}
	room := maxAddress - len(suffix)
	service = names.DNS1123LabelMax(raw, room)
	if len(service) > room {
		return "", "", fmt.Errorf("the address of Service '%s' cannot fit in %d characters: namespace '%s' and cluster domain '%s' leave %d", names.DNS1123Label(raw), maxAddress, n.Namespace, n.ClusterDomain, room)
	}
	return service, service + suffix, nil
}

// GroupAddress is the address of the group Service, `link(x).address`.
func (n Network) GroupAddress(deployment, group string) (string, error) {
	_, a, err := n.Address(deployment + "-" + group)
	return a, err
}

// Subset is a part of a group that `link(x).address(criteria)` names with a
// Service of its own: the instances of one AZ ("" for every AZ) and, when
// Healthy (`status: healthy`), only the ready ones.
type Subset struct {
	AZ      string
	Healthy bool
}

// Subsets are the subsets of a group over azs that need a Service besides
// the group's: its healthy instances, and with several AZs each AZ's
// instances and healthy instances.
func Subsets(azs []string) []Subset {
	out := []Subset{{Healthy: true}}
	if len(azs) > 1 {
		for _, az := range azs {
			out = append(out, Subset{AZ: az}, Subset{AZ: az, Healthy: true})
		}
	}
	return out
}

// SubsetAddress is the address of a subset's Service
// `<deployment>-<ig>[-az-<az>][-healthy]`, and the Service's name.
func (n Network) SubsetAddress(deployment, group string, s Subset) (service, address string, err error) {
	raw := deployment + "-" + group
	if s.AZ != "" {
		raw += "-az-" + s.AZ
	}
	if s.Healthy {
		raw += "-healthy"
	}
	return n.Address(raw)
}

// Instances lists every instance of a group of count instances over azs:
// index i runs in AZ i mod |azs| with ordinal i div |azs|.
func (n Network) Instances(deployment, group string, azs []string, count int) ([]Instance, error) {
	out := make([]Instance, count)
	for i := range out {
		var err error
		if out[i], err = n.Instance(deployment, group, azs, i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Instance is instance i of a group over azs, as Instances lists it: a pod
// needs its own identity only, not its whole group's.
func (n Network) Instance(deployment, group string, azs []string, i int) (Instance, error) {
	azCount := max(len(azs), 1)
	inst := Instance{
		Index:     i,
		AZIndex:   i%azCount + 1,
		Ordinal:   i / azCount,
		Bootstrap: i == 0,
		ID:        ID(deployment, group, i),
	}
	if len(azs) > 0 {
		inst.AZ = azs[i%azCount]
	}
	var err error
	inst.Service, inst.Address, err = n.Address(fmt.Sprintf("%s-%s-%d", deployment, group, i))
	return inst, err
}

// JobRef names a job, or a release, with its version.
type JobRef struct{ Name, Version string }

// SpecInput is the part of the template spec shared by a group's instances
// plus the one job the spec is rendered for.
type SpecInput struct {
	Deployment, InstanceGroup string
	// Jobs are the group's jobs in order (spec.job.templates).
	Jobs           []JobRef
	PersistentDisk int
	// Properties are the job's bound, interpolated properties; Links its
	// consumed link contents by name; Release its release.
	Properties any
	Links      *yamlvalue.Map
	Release    JobRef
}

// DNSDomain is the director's default root domain (spec.dns_domain_name).
const DNSDomain = "bosh"

// Spec is the director's template spec for this instance and job,
// keys in the director's order. `ip` and the network's `ip` are nil: the
// pod IP is filled in at render time.
func (inst Instance) Spec(in SpecInput) *yamlvalue.Map {
	templates := make([]any, len(in.Jobs))
	for i, j := range in.Jobs {
		t := yamlvalue.NewMap()
		t.Set("name", j.Name)
		t.Set("version", j.Version)
		t.Set("sha1", nil)
		t.Set("blobstore_id", nil)
		templates[i] = t
	}
	job := yamlvalue.NewMap()
	job.Set("name", in.InstanceGroup)
	job.Set("templates", templates)
	if len(in.Jobs) > 0 {
		job.Set("template", in.Jobs[0].Name)
		job.Set("version", in.Jobs[0].Version)
	}
	net := yamlvalue.NewMap()
	net.Set("type", "manual")
	net.Set("ip", nil)
	net.Set("netmask", nil)
	net.Set("gateway", nil)
	net.Set("default", []any{"dns", "gateway"})
	net.Set("dns", []any{})
	net.Set("cloud_properties", yamlvalue.NewMap())
	net.Set("dns_record_name", fmt.Sprintf("%d.%s.default.%s.%s", inst.Index, in.InstanceGroup, in.Deployment, DNSDomain))
	networks := yamlvalue.NewMap()
	networks.Set("default", net)
	links := in.Links
	if links == nil {
		links = yamlvalue.NewMap()
	}
	release := yamlvalue.NewMap()
	release.Set("name", in.Release.Name)
	release.Set("version", in.Release.Version)

	s := yamlvalue.NewMap()
	s.Set("deployment", in.Deployment)
	s.Set("job", job)
	s.Set("index", int64(inst.Index))
	s.Set("bootstrap", inst.Bootstrap)
	s.Set("name", in.InstanceGroup)
	s.Set("id", inst.ID)
	if inst.AZ == "" {
		s.Set("az", nil)
	} else {
		s.Set("az", inst.AZ)
	}
	s.Set("networks", networks)
	s.Set("properties_need_filtering", true)
	s.Set("dns_domain_name", DNSDomain)
	s.Set("persistent_disk", int64(in.PersistentDisk))
	s.Set("address", inst.Address)
	s.Set("ip", nil)
	s.Set("properties", in.Properties)
	s.Set("links", links)
	s.Set("release", release)
	return s
}

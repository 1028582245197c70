// Package resolved is the content of an instance group's
// "<deployment>.ig-resolved.<ig>-vN" Secret: what the render init container
// needs to render any instance of the group without API access. Job
// templates are not in it; render reads them from the release images'
// copies under /var/vcap/all-releases/jobs-src.
package resolved

import (
	"fmt"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Key is the Secret data key holding the encoded Group.
const Key = "resolved.json"

// Group is a resolved instance group.
type Group struct {
	Deployment       string   `json:"deployment"`
	InstanceGroup    string   `json:"instance_group"`
	ClusterDomain    string   `json:"cluster_domain"`
	AZs              []string `json:"azs,omitempty"`
	Instances        int      `json:"instances"`
	PersistentDiskMB int      `json:"persistent_disk_mb,omitempty"`
	Jobs             []Job    `json:"jobs"`
}

// Job is one job of the group with its bound, interpolated properties and
// consumed link contents.
type Job struct {
	Name           string         `json:"name"`
	Release        string         `json:"release"`
	ReleaseVersion string         `json:"release_version"`
	Properties     *yamlvalue.Map `json:"properties"`
	Links          *yamlvalue.Map `json:"links"`
}

// FromDeployment takes group g of the resolved deployment d.
func FromDeployment(d *deployment.Deployment, g *deployment.Group, clusterDomain string) Group {
	out := Group{
		Deployment:       d.Name,
		InstanceGroup:    g.Manifest.Name,
		ClusterDomain:    clusterDomain,
		AZs:              g.Manifest.AZs,
		Instances:        g.Manifest.Instances,
		PersistentDiskMB: g.Manifest.PersistentDisk,
	}
	for _, j := range g.Jobs {
		out.Jobs = append(out.Jobs, Job{Name: j.Name, Release: j.Release, ReleaseVersion: j.ReleaseVersion, Properties: j.Properties, Links: j.Links})
	}
	return out
}

// Instance returns instance index of the group in namespace, and its
// template spec per job (in job order) with the pod's IP filled in.
func (g *Group) Instance(namespace string, index int, podIP string) (instance.Instance, []*yamlvalue.Map, error) {
	if index < 0 || index >= g.Instances {
		return instance.Instance{}, nil, fmt.Errorf("instance index %d is beyond instance group '%s', which has %d instances", index, g.InstanceGroup, g.Instances)
	}
	net := instance.Network{Namespace: namespace, ClusterDomain: g.ClusterDomain}
	inst, err := net.Instance(g.Deployment, g.InstanceGroup, g.AZs, index)
	if err != nil {
		return instance.Instance{}, nil, err
	}
	refs := make([]instance.JobRef, len(g.Jobs))
	for i, j := range g.Jobs {
		refs[i] = instance.JobRef{Name: j.Name, Version: j.ReleaseVersion}
	}
	specs := make([]*yamlvalue.Map, len(g.Jobs))
	for i, j := range g.Jobs {
		s := inst.Spec(instance.SpecInput{
			Deployment:     g.Deployment,
			InstanceGroup:  g.InstanceGroup,
			Jobs:           refs,
			PersistentDisk: g.PersistentDiskMB,
			Properties:     j.Properties,
			Links:          j.Links,
			Release:        instance.JobRef{Name: j.Release, Version: j.ReleaseVersion},
		})
		specs[i] = WithIP(s, podIP)
	}
	return inst, specs, nil
}

// WithIP returns a template spec with the pod's IP filled in: `spec.ip`
// and the default network's ip, which only the running pod knows. Only the
// maps on those paths are copied: the rest (properties, links) stays shared
// with spec, so the renderer sends it once for all instances.
func WithIP(spec *yamlvalue.Map, ip string) *yamlvalue.Map {
	out := spec.ShallowCopy()
	out.Set("ip", ip)
	if nets, ok := out.Get("networks"); ok {
		nets := nets.(*yamlvalue.Map).ShallowCopy()
		out.Set("networks", nets)
		if def, ok := nets.Get("default"); ok {
			def := def.(*yamlvalue.Map).ShallowCopy()
			def.Set("ip", ip)
			nets.Set("default", def)
		}
	}
	return out
}

package links

import "github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"

// diskProviders registers a provider of type disk for each named disk of
// group gi (`persistent_disks`), as the director's
// link_providers_parser.rb parse_provider_from_disk does: named like the
// disk, not shared, consumable by any job of the deployment.
func (r *resolver) diskProviders(gi int) {
	for _, d := range r.d.Groups[gi].Manifest.PersistentDisks {
		r.provs = append(r.provs, provider{group: gi, job: -1, original: d.Name, name: d.Name, typ: "disk", consumable: true, disk: true})
	}
}

// diskContent is a disk link's content, the director's DiskLink spec:
// only the disk's name, no instances or networks (so no address).
func diskContent(deployment, disk string) *yamlvalue.Map {
	props := yamlvalue.NewMap()
	props.Set("name", disk)
	c := yamlvalue.NewMap()
	c.Set("deployment_name", deployment)
	c.Set("properties", props)
	c.Set("networks", []any{})
	c.Set("instances", []any{})
	return c
}

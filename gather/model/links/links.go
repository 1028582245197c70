// Package links resolves BOSH links within one deployment exactly as the
// director does: provider and consumer intents from job specs and the
// manifest's provides/consumes, implicit matching by type, explicit
// `from`/`as`, the string "nil" blocking, optional links, manual links,
// custom provider definitions, and link properties with their own null
// rule. Errors are aggregated in the director's format. Instance and group
// addresses are the Kubernetes Service addresses of gather/model/instance.
package links

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/properties"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Deployment is what link resolution needs of a deployment.
type Deployment struct {
	Name    string
	Network instance.Network
	Groups  []Group
	// Shared returns the links another deployment of the namespace shares
	// (`shared: true`), false when no such deployment exists; nil knows no
	// other deployment.
	Shared func(deployment string) ([]SharedLink, bool)
}

// SharedLink is a provider shared with other deployments: its name (alias)
// and type, where it comes from, and its link content, which its own
// deployment's gathering publishes.
type SharedLink struct {
	Name     string         `json:"name"`
	Original string         `json:"original"`
	Type     string         `json:"type"`
	Job      string         `json:"job"`
	Group    string         `json:"instance_group"`
	Content  *yamlvalue.Map `json:"content"`
}

// Group is an instance group with its instances and jobs.
type Group struct {
	Manifest  *manifest.InstanceGroup
	Instances []instance.Instance
	Jobs      []Job
}

// Job is a job of a group: its manifest entry, spec and raw property source,
// from which link properties are taken.
type Job struct {
	Manifest *manifest.Job
	Spec     *jobspec.Spec
	Raw      *yamlvalue.Map
}

// Resolve returns, for every group and job (same indexes as d.Groups and
// their Jobs), the job's consumed links by consumer name: what templates
// reach as `link(name)` and `spec.links`. Unresolved optional and blocked
// links are absent.
func Resolve(d Deployment) ([][]*yamlvalue.Map, error) {
	r := resolver{d: d}
	for gi := range d.Groups {
		for ji := range d.Groups[gi].Jobs {
			r.providers(gi, ji)
		}
		r.diskProviders(gi)
	}
	for gi := range d.Groups {
		for ji := range d.Groups[gi].Jobs {
			r.consumers(gi, ji)
		}
	}
	if len(r.manifestErrs) > 0 {
		return nil, errors.New(strings.Join(r.manifestErrs, "\n"))
	}
	out := make([][]*yamlvalue.Map, len(d.Groups))
	for gi, g := range d.Groups {
		out[gi] = make([]*yamlvalue.Map, len(g.Jobs))
		for ji := range g.Jobs {
			out[gi][ji] = yamlvalue.NewMap()
		}
	}
	var resolveErrs []string
	for _, c := range r.cons {
		content, errText := r.resolve(c)
		if errText != "" {
			resolveErrs = append(resolveErrs, errText)
			continue
		}
		if content != nil {
			out[c.group][c.job].Set(c.original, content)
		}
	}
	if len(resolveErrs) > 0 {
		return nil, fmt.Errorf("Failed to resolve links from deployment '%s'. See errors below:\n%s", d.Name, strings.Join(resolveErrs, "\n"))
	}
	return out, nil
}

type provider struct {
	group, job     int
	original, name string
	typ            string
	consumable     bool
	shared         bool
	properties     *yamlvalue.Map
	// disk is a provider of a group's named disk (job is -1).
	disk bool
}

type consumer struct {
	group, job     int
	original, name string
	typ            string
	optional       bool
	blocked        bool
	explicit       bool
	network        string
	manual         *yamlvalue.Map
	// deployment is the other deployment of the namespace the link
	// consumes from, "" for this one.
	deployment string
}

type resolver struct {
	d            Deployment
	provs        []provider
	cons         []consumer
	manifestErrs []string
}

func (r *resolver) where(gi, ji int) (job, group string) {
	g := r.d.Groups[gi]
	return g.Jobs[ji].Manifest.Name, g.Manifest.Name
}

func (r *resolver) errorf(format string, args ...any) {
	r.manifestErrs = append(r.manifestErrs, fmt.Sprintf(format, args...))
}

// providers registers the provider intents of one job.
func (r *resolver) providers(gi, ji int) {
	j := r.d.Groups[gi].Jobs[ji]
	job, group := r.where(gi, ji)
	type decl struct {
		name, typ string
		props     []string
	}
	var decls []decl
	for _, p := range j.Spec.Provides {
		decls = append(decls, decl{p.Name, p.Type, p.Properties})
	}
	for _, c := range j.Manifest.CustomProviderDefinitions {
		clash := false
		for _, p := range j.Spec.Provides {
			clash = clash || p.Name == c.Name
		}
		if clash {
			r.errorf("Custom provider '%s' in job '%s' in instance group '%s' is already defined in release '%s'", c.Name, job, group, j.Manifest.Release)
			continue
		}
		decls = append(decls, decl{c.Name, c.Type, c.Properties})
	}
	for _, dc := range decls {
		p := provider{group: gi, job: ji, original: dc.name, name: dc.name, typ: dc.typ, consumable: true}
		if entry, ok := j.Manifest.Provides.Get(dc.name); ok {
			switch e := entry.(type) {
			case string:
				if e != "nil" {
					r.errorf("Provider '%s' in job '%s' in instance group '%s' specified in the manifest should only be a hash or string 'nil'", dc.name, job, group)
					continue
				}
				p.consumable = false
			case *yamlvalue.Map:
				if e.Has("name") || e.Has("type") {
					r.errorf("Cannot specify 'name' or 'type' properties in the manifest for link '%s' in job '%s' in instance group '%s'. Please provide these keys in the release only.", dc.name, job, group)
					continue
				}
				// Only a boolean true shares the provider.
				shared, _ := e.Get("shared")
				p.shared = shared == true
				if as, ok := e.Get("as"); ok && as != nil {
					p.name = fmt.Sprint(as)
				}
			default:
				r.errorf("Provider '%s' in job '%s' in instance group '%s' specified in the manifest should only be a hash or string 'nil'", dc.name, job, group)
				continue
			}
		}
		p.properties = yamlvalue.NewMap()
		for _, name := range dc.props {
			v, found := properties.Lookup(j.Raw, strings.Split(name, "."))
			if !found {
				decl := j.Spec.Property(name)
				if decl == nil {
					r.errorf("Link property %s in template %s is not defined in release spec", name, job)
					continue
				}
				v = decl.Default
			}
			if err := properties.SetPath(p.properties, name, yamlvalue.Clone(v)); err != nil {
				r.errorf("Link property %s in template %s: %v", name, job, err)
			}
		}
		r.provs = append(r.provs, p)
	}
}

// consumers registers the consumer intents of one job.
func (r *resolver) consumers(gi, ji int) {
	j := r.d.Groups[gi].Jobs[ji]
	job, group := r.where(gi, ji)
	for _, sc := range j.Spec.Consumes {
		c := consumer{group: gi, job: ji, original: sc.Name, name: sc.Name, typ: sc.Type, optional: sc.Optional}
		entry, ok := j.Manifest.Consumes.Get(sc.Name)
		if ok {
			c.explicit = true
			switch e := entry.(type) {
			case string:
				if e != "nil" {
					r.errorf("Consumer '%s' in job '%s' in instance group '%s' specified in the manifest should only be a hash or string 'nil'", sc.Name, job, group)
					continue
				}
				c.blocked = true
			case *yamlvalue.Map:
				if !r.consumerHash(&c, e, job, group) {
					continue
				}
			default:
				r.errorf("Consumer '%s' in job '%s' in instance group '%s' specified in the manifest should only be a hash or string 'nil'", sc.Name, job, group)
				continue
			}
		}
		r.cons = append(r.cons, c)
	}
}

// consumerHash reads a Hash consumes entry; false when it is invalid.
func (r *resolver) consumerHash(c *consumer, e *yamlvalue.Map, job, group string) bool {
	n := len(r.manifestErrs)
	l := c.original
	if e.Has("name") || e.Has("type") {
		r.errorf("Cannot specify 'name' or 'type' properties in the manifest for link '%s' in job '%s' in instance group '%s'. Please provide these keys in the release only.", l, job, group)
	}
	if e.Has("from") && e.Has("instances") {
		r.errorf("Cannot specify both 'instances' and 'from' keys for link '%s' in job '%s' in instance group '%s'.", l, job, group)
	}
	if e.Has("from") && e.Has("properties") {
		r.errorf("Cannot specify both 'properties' and 'from' keys for link '%s' in job '%s' in instance group '%s'.", l, job, group)
	}
	if e.Has("properties") && !e.Has("instances") {
		r.errorf("Cannot specify 'properties' without 'instances' for link '%s' in job '%s' in instance group '%s'.", l, job, group)
	}
	if ip, ok := e.Get("ip_addresses"); ok {
		if _, isBool := ip.(bool); !isBool {
			r.errorf("Cannot specify non boolean values for 'ip_addresses' field for link '%s' in job '%s' in instance group '%s'.", l, job, group)
		}
	}
	from, _ := e.Get("from")
	if from != nil {
		s := fmt.Sprint(from)
		c.name = s[strings.LastIndex(s, ".")+1:]
	}
	if dep, ok := e.Get("deployment"); ok && dep != nil && fmt.Sprint(dep) != r.d.Name {
		exists := false
		if r.d.Shared != nil {
			_, exists = r.d.Shared(fmt.Sprint(dep))
		}
		if !exists {
			r.errorf("Link '%s' in job '%s' from instance group '%s' consumes from deployment '%v', but the deployment does not exist.", c.name, job, group, dep)
		}
		c.deployment = fmt.Sprint(dep)
	}
	if nw, ok := e.Get("network"); ok && nw != nil {
		c.network = fmt.Sprint(nw)
	}
	if len(r.manifestErrs) > n {
		return false
	}
	if e.Has("instances") || e.Has("properties") || e.Has("address") {
		manual := yamlvalue.NewMap()
		for _, k := range []string{"instances", "properties", "address"} {
			v, _ := e.Get(k)
			manual.Set(k, yamlvalue.Clone(v))
		}
		if v, _ := manual.Get("instances"); v == nil {
			// The director crashes on a manual link without instances
			// while rendering; an empty list is what was meant.
			manual.Set("instances", []any{})
		}
		manual.Set("deployment_name", r.d.Name)
		c.manual = manual
	}
	return true
}

// resolve resolves one consumer as the director does: its link content, nil for no link,
// or the text of its error block.
func (r *resolver) resolve(c consumer) (*yamlvalue.Map, string) {
	if c.manual != nil {
		return c.manual, ""
	}
	if c.deployment != "" {
		return r.resolveShared(c)
	}
	var cands []provider
	if !c.blocked {
		for _, p := range r.provs {
			if p.typ == c.typ && p.consumable && (!c.explicit || p.name == c.name) {
				cands = append(cands, p)
			}
		}
	}
	head := r.head(c)
	switch {
	case len(cands) == 0 && c.optional && (!c.explicit || c.blocked):
		return nil, ""
	case len(cands) == 0:
		return nil, head + " Details below:\n    - No link providers found"
	case len(cands) > 1:
		lines := []string{head + " Multiple link providers found:"}
		for _, p := range cands {
			lines = append(lines, "    - "+r.describe(p))
		}
		return nil, strings.Join(lines, "\n")
	}
	p := cands[0]
	pg := r.d.Groups[p.group]
	if c.network != "" && p.disk {
		return nil, head + " Details below:\n    - " + r.describe(p) + " does not contain any networks"
	}
	if c.network != "" && !hasNetwork(pg.Manifest, c.network) {
		return nil, head + " Details below:\n    - " + r.describe(p) + fmt.Sprintf(" does not belong to network '%s'", c.network)
	}
	content, err := r.content(p)
	if err != nil {
		return nil, head + " Details below:\n    - " + err.Error()
	}
	return content, ""
}

// head is the first line of a consumer's error block.
func (r *resolver) head(c consumer) string {
	job, group := r.where(c.group, c.job)
	head := fmt.Sprintf("  - Failed to resolve link '%s' with ", c.original)
	if c.name != c.original {
		head += fmt.Sprintf("alias '%s' and ", c.name)
	}
	return head + fmt.Sprintf("type '%s' from job '%s' in instance group '%s'.", c.typ, job, group)
}

// resolveShared resolves an explicit consumer against the providers
// another deployment shares, matching name, type and shared as the director does.
func (r *resolver) resolveShared(c consumer) (*yamlvalue.Map, string) {
	shared, _ := r.d.Shared(c.deployment)
	var cands []SharedLink
	if !c.blocked {
		for _, s := range shared {
			if s.Type == c.typ && s.Name == c.name {
				cands = append(cands, s)
			}
		}
	}
	switch {
	case len(cands) == 0:
		return nil, r.head(c) + " Details below:\n    - No link providers found"
	case len(cands) > 1:
		lines := []string{r.head(c) + " Multiple link providers found:"}
		for _, s := range cands {
			d := fmt.Sprintf("    - Link provider '%s'", s.Original)
			if s.Name != s.Original {
				d += fmt.Sprintf(" with alias '%s'", s.Name)
			}
			lines = append(lines, d+fmt.Sprintf(" from job '%s' in instance group '%s' in deployment '%s'", s.Job, s.Group, c.deployment))
		}
		return nil, strings.Join(lines, "\n")
	}
	return yamlvalue.Clone(cands[0].Content).(*yamlvalue.Map), ""
}

// Published returns the providers of d shared with other deployments
// (`shared: true`, consumable), with their link content.
func Published(d Deployment) ([]SharedLink, error) {
	r := resolver{d: d}
	for gi := range d.Groups {
		for ji := range d.Groups[gi].Jobs {
			r.providers(gi, ji)
		}
	}
	if len(r.manifestErrs) > 0 {
		return nil, errors.New(strings.Join(r.manifestErrs, "\n"))
	}
	var out []SharedLink
	for _, p := range r.provs {
		if !p.shared || !p.consumable {
			continue
		}
		content, err := r.content(p)
		if err != nil {
			return nil, err
		}
		job, group := r.where(p.group, p.job)
		out = append(out, SharedLink{Name: p.name, Original: p.original, Type: p.typ, Job: job, Group: group, Content: content})
	}
	return out, nil
}

func hasNetwork(g *manifest.InstanceGroup, name string) bool {
	for _, n := range g.Networks {
		if n.Name == name {
			return true
		}
	}
	return false
}

func (r *resolver) describe(p provider) string {
	if p.disk {
		return fmt.Sprintf("Disk link provider '%s' from instance group '%s'", p.original, r.d.Groups[p.group].Manifest.Name)
	}
	job, group := r.where(p.group, p.job)
	s := fmt.Sprintf("Link provider '%s'", p.original)
	if p.name != p.original {
		s += fmt.Sprintf(" with alias '%s'", p.name)
	}
	return s + fmt.Sprintf(" from job '%s' in instance group '%s' in deployment '%s'", job, group, r.d.Name)
}

// network is the one network instances have on Kubernetes.
const network = "default"

// content is the link content of a job provider, plus the
// group Service address under `address` for `link(x).address`.
func (r *resolver) content(p provider) (*yamlvalue.Map, error) {
	if p.disk {
		return diskContent(r.d.Name, p.original), nil
	}
	g := r.d.Groups[p.group]
	addr, err := r.d.Network.GroupAddress(r.d.Name, g.Manifest.Name)
	if err != nil {
		return nil, err
	}
	instances := make([]any, len(g.Instances))
	for i, inst := range g.Instances {
		m := yamlvalue.NewMap()
		m.Set("name", g.Manifest.Name)
		m.Set("id", inst.ID)
		m.Set("index", int64(inst.Index))
		m.Set("bootstrap", inst.Bootstrap)
		if inst.AZ == "" {
			m.Set("az", nil)
		} else {
			m.Set("az", inst.AZ)
		}
		m.Set("address", inst.Address)
		instances[i] = m
	}
	c := yamlvalue.NewMap()
	c.Set("deployment_name", r.d.Name)
	c.Set("domain", instance.DNSDomain)
	c.Set("default_network", network)
	c.Set("networks", []any{network})
	c.Set("instance_group", g.Manifest.Name)
	c.Set("properties", yamlvalue.Clone(p.properties))
	c.Set("use_short_dns_addresses", false)
	c.Set("use_dns_addresses", true)
	c.Set("use_link_dns_names", false)
	c.Set("group_name", p.name+"-"+p.typ)
	c.Set("instances", instances)
	c.Set("address", addr)
	addresses, err := r.subsetAddresses(g, addr)
	if err != nil {
		return nil, err
	}
	c.Set("addresses", addresses)
	return c, nil
}

// subsetAddresses are the addresses `link(x).address(criteria)` picks from:
// {all, healthy, azs: {<az>: {all, healthy}}}, each a Service selecting
// exactly those instances.
func (r *resolver) subsetAddresses(g Group, all string) (*yamlvalue.Map, error) {
	out := yamlvalue.NewMap()
	out.Set("all", all)
	azs := yamlvalue.NewMap()
	for _, s := range instance.Subsets(g.Manifest.AZs) {
		_, a, err := r.d.Network.SubsetAddress(r.d.Name, g.Manifest.Name, s)
		if err != nil {
			return nil, err
		}
		key := "all"
		if s.Healthy {
			key = "healthy"
		}
		if s.AZ == "" {
			out.Set(key, a)
			continue
		}
		az, ok := azs.Get(s.AZ)
		if !ok {
			az = yamlvalue.NewMap()
			azs.Set(s.AZ, az)
		}
		az.(*yamlvalue.Map).Set(key, a)
	}
	out.Set("azs", azs)
	return out, nil
}

// ProviderAddress is the group address of the link provider named (or
// aliased) name in d, which a certificate variable's `consumes` injects as
// a common or alternative name.
func ProviderAddress(d Deployment, name string) (string, error) {
	r := resolver{d: d}
	for gi := range d.Groups {
		for ji := range d.Groups[gi].Jobs {
			r.providers(gi, ji)
		}
	}
	if len(r.manifestErrs) > 0 {
		return "", errors.New(strings.Join(r.manifestErrs, "\n"))
	}
	var found []provider
	for _, p := range r.provs {
		if p.consumable && p.name == name {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no link provider '%s' in deployment '%s'", name, d.Name)
	case 1:
		return d.Network.GroupAddress(d.Name, d.Groups[found[0].group].Manifest.Name)
	}
	lines := []string{fmt.Sprintf("multiple link providers '%s' in deployment '%s':", name, d.Name)}
	for _, p := range found {
		lines = append(lines, "- "+r.describe(p))
	}
	return "", errors.New(strings.Join(lines, "\n"))
}

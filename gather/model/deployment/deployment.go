// Package deployment composes the BOSH deployment model that gather, the
// `template` command and the render step build on. Two calls:
//
//	m, err := deployment.Load(manifestYAML, opsFiles, vars, now)
//	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: specs,
//	        Variables: vars, Network: instance.Network{Namespace: ns, ClusterDomain: domain}})
//
// Load reads the manifest with its ops files applied in order as the
// director reads it from `bosh deploy` (package boshcli), generates missing
// variables, and interpolates everything except property subtrees, which
// the director interpolates only after binding. Resolve generates the certificates that consume links (their
// names are provider group addresses), then gives, per instance group, the jobs in order with
// their release, spec (templates and their contents), bound and
// interpolated properties and consumed links, and every instance with its
// identity and its template `spec` document per job. Errors of all groups
// and jobs are aggregated in the director's nested-list format.
package deployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/model/boshcli"
	"github.com/bosh-injector/bosh-injector/gather/model/inputfile"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/model/links"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/properties"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// OpsFile is a named ops file; the name appears in errors.
type OpsFile = boshcli.OpsFile

// ReadOpsFiles reads ops files, named by their paths.
func ReadOpsFiles(ctx context.Context, paths []string) ([]OpsFile, error) {
	var ops []OpsFile
	for _, path := range paths {
		d, err := inputfile.Read(ctx, "--ops-file", path)
		if err != nil {
			return nil, err
		}
		ops = append(ops, OpsFile{Name: path, Data: d})
	}
	return ops, nil
}

// OpsFilesOf are the ops files of a manifest Secret's data: its keys
// `ops-<NN>-<name>.yaml` (or .yml), in key order, which is the order they
// apply in.
func OpsFilesOf(data map[string][]byte) []OpsFile {
	var ops []OpsFile
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if strings.HasPrefix(k, "ops-") && (strings.HasSuffix(k, ".yaml") || strings.HasSuffix(k, ".yml")) {
			ops = append(ops, OpsFile{Name: k, Data: data[k]})
		}
	}
	return ops
}

// Load reads a manifest, applies ops files, generates the manifest's
// variables missing from vars (certificates valid from now) and
// interpolates all but the property subtrees.
func Load(manifestYAML []byte, ops []OpsFile, vars variables.Source, now time.Time) (*manifest.Manifest, error) {
	doc, err := Document(manifestYAML, ops)
	if err != nil {
		return nil, err
	}
	defs, err := manifest.VariablesOf(doc)
	if err != nil {
		return nil, err
	}
	if err := interpolateOptions(defs, vars); err != nil {
		return nil, err
	}
	if err := variables.GenerateWithLinks(defs, vars, now, nil, manifest.ConvergeVariables(doc)); err != nil {
		return nil, err
	}
	root, ok := doc.(*yamlvalue.Map)
	if !ok {
		return manifest.FromDocument(doc)
	}
	// Property subtrees are set aside, the rest interpolated, and the
	// subtrees put back untouched.
	held := holdProperties(root)
	out, err := variables.Interpolate(root, vars)
	held.restore()
	if err != nil {
		return nil, err
	}
	held.into(out.(*yamlvalue.Map))
	return manifest.FromDocument(out)
}

// interpolateOptions resolves the placeholders in the variables' options
// (cf-deployment's `common_name: api.((system_domain))`), as the director
// does: it interpolates the manifest, properties aside, before it has its
// config server generate the variables, so what they name must exist.
func interpolateOptions(defs []manifest.Variable, vars variables.Source) error {
	for i, d := range defs {
		if d.Options == nil {
			continue
		}
		out, err := variables.Interpolate(d.Options, vars)
		if err != nil {
			return err
		}
		defs[i].Options = out.(*yamlvalue.Map)
	}
	return nil
}

// heldProperties keeps the property subtrees of a manifest document while
// the rest is interpolated.
type heldProperties struct {
	slots []slot
}

type slot struct {
	path []any // keys (string) and list indexes (int) from the root
	m    *yamlvalue.Map
	v    any
}

func holdProperties(root *yamlvalue.Map) *heldProperties {
	h := &heldProperties{}
	h.take(root, nil)
	for _, list := range []string{"instance_groups", "addons"} {
		items, _ := root.Get(list)
		groups, _ := items.([]any)
		for gi, g := range groups {
			gm, ok := g.(*yamlvalue.Map)
			if !ok {
				continue
			}
			h.take(gm, []any{list, gi})
			jobsV, _ := gm.Get("jobs")
			jobs, _ := jobsV.([]any)
			for ji, j := range jobs {
				if jm, ok := j.(*yamlvalue.Map); ok {
					h.take(jm, []any{list, gi, "jobs", ji})
				}
			}
		}
	}
	return h
}

func (h *heldProperties) take(m *yamlvalue.Map, path []any) {
	if v, ok := m.Get("properties"); ok {
		h.slots = append(h.slots, slot{path: path, m: m, v: v})
		m.Set("properties", nil)
	}
}

// restore puts the subtrees back into the original document.
func (h *heldProperties) restore() {
	for _, s := range h.slots {
		s.m.Set("properties", s.v)
	}
}

// into puts the subtrees into the interpolated copy, whose shape is the
// same as the original's unless a placeholder replaced a group or job.
func (h *heldProperties) into(root *yamlvalue.Map) {
	for _, s := range h.slots {
		var cur any = root
		for _, step := range s.path {
			switch k := step.(type) {
			case string:
				m, _ := cur.(*yamlvalue.Map)
				cur, _ = m.Get(k)
			case int:
				if l, ok := cur.([]any); ok && k < len(l) {
					cur = l[k]
				} else {
					cur = nil
				}
			}
		}
		// A placeholder that replaced a whole group or job entry leaves no
		// place to put the subtree back.
		if m, ok := cur.(*yamlvalue.Map); ok {
			m.Set("properties", yamlvalue.Clone(s.v))
		}
	}
}

// Document is the manifest with its ops files applied in order, as the
// director reads it from `bosh deploy`, without interpolating anything.
func Document(manifestYAML []byte, ops []OpsFile) (any, error) {
	return boshcli.Document(manifestYAML, ops)
}

// SpecSource returns the spec of a release's job.
type SpecSource func(release, job string) (*jobspec.Spec, error)

// ImageLayoutSpecs reads specs from `<root>/<release>/<job>/job.MF`, the
// layout the copy init containers leave under /var/vcap/all-releases/jobs-src.
func ImageLayoutSpecs(root string) SpecSource {
	return cached(func(release, job string) (*jobspec.Spec, error) {
		s, err := jobspec.LoadImageLayout(filepath.Join(root, release), job)
		if errors.Is(err, os.ErrNotExist) {
			// The director's words, not a path inside the gathering pod.
			return nil, fmt.Errorf("Can't find job '%s' in release '%s'", job, release)
		}
		return s, err
	})
}

// SourceTreeSpecs reads specs from release source trees, by release name.
func SourceTreeSpecs(dirs map[string]string) SpecSource {
	return cached(func(release, job string) (*jobspec.Spec, error) {
		dir, ok := dirs[release]
		if !ok {
			return nil, fmt.Errorf("no source tree for release '%s'", release)
		}
		return jobspec.LoadSourceTree(dir, job)
	})
}

func cached(load SpecSource) SpecSource {
	var mu sync.Mutex
	seen := map[[2]string]*jobspec.Spec{}
	return func(release, job string) (*jobspec.Spec, error) {
		mu.Lock()
		defer mu.Unlock()
		key := [2]string{release, job}
		if s, ok := seen[key]; ok {
			return s, nil
		}
		s, err := load(release, job)
		if err != nil {
			return nil, err
		}
		seen[key] = s
		return s, nil
	}
}

// Input is what Resolve needs.
type Input struct {
	Manifest  *manifest.Manifest
	Specs     SpecSource
	Variables variables.Source
	Network   instance.Network
	// Now is the start of validity of certificates generated here (those
	// consuming links); zero means the current time.
	Now time.Time
	// Shared returns the links other deployments of the namespace share,
	// false for a deployment that does not exist; nil knows none.
	Shared func(deployment string) ([]links.SharedLink, bool)
}

// Deployment is the resolved model.
type Deployment struct {
	Name string
	// Manifest is the manifest resolved (release images come from it).
	Manifest *manifest.Manifest
	Groups   []Group
	// Shared are the links this deployment shares with the others of its
	// namespace, their properties interpolated.
	Shared []links.SharedLink
}

// Group is a resolved instance group.
type Group struct {
	Manifest  *manifest.InstanceGroup
	Jobs      []Job
	Instances []Instance
	// Address is the group Service's address.
	Address string
}

// Job is a resolved job of a group.
type Job struct {
	Name           string
	Release        string
	ReleaseVersion string
	Spec           *jobspec.Spec
	// Properties are bound and interpolated; Links are the consumed
	// links by name, their properties interpolated.
	Properties *yamlvalue.Map
	Links      *yamlvalue.Map
}

// Instance is an instance with its template spec per job (same order as
// the group's Jobs).
type Instance struct {
	instance.Instance
	Specs []*yamlvalue.Map
}

// Resolve binds properties, resolves links and computes every instance's
// identity and spec documents.
func Resolve(in Input) (*Deployment, error) {
	m := in.Manifest
	d := &Deployment{Name: m.Name, Manifest: m, Groups: make([]Group, len(m.InstanceGroups))}
	ld := links.Deployment{Name: m.Name, Network: in.Network, Groups: make([]links.Group, len(m.InstanceGroups)), Shared: in.Shared}
	errs := make([][]string, len(m.InstanceGroups))
	jobErr := func(gi int, job string, err error) {
		errs[gi] = append(errs[gi], fmt.Sprintf("Job '%s': %s", job, indent(err.Error(), "    ")))
	}
	// Identity, specs and raw property sources first: certificate
	// variables consuming links need the providers before binding
	// interpolates them.
	for gi := range m.InstanceGroups {
		mg := &m.InstanceGroups[gi]
		g := &d.Groups[gi]
		g.Manifest = mg
		insts, err := in.Network.Instances(m.Name, mg.Name, mg.AZs, mg.Instances)
		if err != nil {
			errs[gi] = append(errs[gi], err.Error())
		}
		if g.Address, err = in.Network.GroupAddress(m.Name, mg.Name); err != nil {
			errs[gi] = append(errs[gi], err.Error())
		}
		ld.Groups[gi] = links.Group{Manifest: mg, Instances: insts}
		for _, inst := range insts {
			g.Instances = append(g.Instances, Instance{Instance: inst})
		}
		for ji := range mg.Jobs {
			job, lj, err := load(in, mg, &mg.Jobs[ji])
			if err != nil {
				jobErr(gi, mg.Jobs[ji].Name, err)
				continue
			}
			g.Jobs = append(g.Jobs, job)
			ld.Groups[gi].Jobs = append(ld.Groups[gi].Jobs, lj)
		}
	}
	// With jobs missing, providers are unknown: the jobs that did load are
	// still bound so that all errors are reported at once.
	if groupErrors(m, errs) == nil {
		now := in.Now
		if now.IsZero() {
			now = time.Now()
		}
		address := func(from string) (string, error) { return links.ProviderAddress(ld, from) }
		if err := variables.GenerateWithLinks(m.Variables, in.Variables, now, address, manifest.ConvergeVariables(m.Raw)); err != nil {
			return nil, err
		}
	}
	for gi := range d.Groups {
		for ji := range d.Groups[gi].Jobs {
			job := &d.Groups[gi].Jobs[ji]
			if err := bind(job, ld.Groups[gi].Jobs[ji].Raw, in.Variables); err != nil {
				jobErr(gi, job.Name, err)
			}
		}
	}
	if err := groupErrors(m, errs); err != nil {
		return nil, err
	}
	resolved, err := links.Resolve(ld)
	if err != nil {
		return nil, err
	}
	var linkErrs []string
	for gi := range d.Groups {
		g := &d.Groups[gi]
		for ji := range g.Jobs {
			// Link properties are interpolated in the provider deployment's
			// context, which is this one.
			l, err := variables.Interpolate(resolved[gi][ji], in.Variables)
			if err != nil {
				linkErrs = append(linkErrs, fmt.Sprintf("- Unable to interpolate links of job '%s' in instance group '%s'. Errors are:\n%s", g.Jobs[ji].Name, g.Manifest.Name, indent(err.Error(), "  ")))
				continue
			}
			g.Jobs[ji].Links = l.(*yamlvalue.Map)
		}
		specs(m.Name, g)
	}
	if len(linkErrs) > 0 {
		return nil, errors.New(strings.Join(linkErrs, "\n"))
	}
	shared, err := links.Published(ld)
	if err != nil {
		return nil, err
	}
	for _, s := range shared {
		content, err := variables.Interpolate(s.Content, in.Variables)
		if err != nil {
			return nil, fmt.Errorf("- Unable to interpolate shared link '%s' of job '%s' in instance group '%s'. Errors are:\n%s", s.Name, s.Job, s.Group, indent(err.Error(), "  "))
		}
		s.Content = content.(*yamlvalue.Map)
		d.Shared = append(d.Shared, s)
	}
	return d, nil
}

// groupErrors formats the errors collected per instance group, nil if none.
func groupErrors(m *manifest.Manifest, errs [][]string) error {
	var out []string
	for gi, e := range errs {
		if len(e) > 0 {
			out = append(out, fmt.Sprintf("- Unable to process instance group '%s'. Errors are:\n  - %s", m.InstanceGroups[gi].Name, strings.Join(e, "\n  - ")))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return errors.New(strings.Join(out, "\n"))
}

// load finds a job's release and spec and its raw property source.
func load(in Input, g *manifest.InstanceGroup, mj *manifest.Job) (Job, links.Job, error) {
	rel := in.Manifest.Release(mj.Release)
	if rel == nil {
		return Job{}, links.Job{}, fmt.Errorf("release '%s' is not in the manifest's releases", mj.Release)
	}
	spec, err := in.Specs(mj.Release, mj.Name)
	if err != nil {
		return Job{}, links.Job{}, err
	}
	raw, err := properties.RawSource(in.Manifest, g, mj)
	if err != nil {
		return Job{}, links.Job{}, err
	}
	return Job{Name: mj.Name, Release: rel.Name, ReleaseVersion: rel.Version, Spec: spec},
		links.Job{Manifest: mj, Spec: spec, Raw: raw}, nil
}

// bind binds and interpolates a job's properties and checks its schema.
func bind(job *Job, raw *yamlvalue.Map, vars variables.Source) error {
	bound, err := properties.Bind(job.Spec.Properties, raw)
	if err != nil {
		return err
	}
	props, err := variables.Interpolate(bound, vars)
	if err != nil {
		return err
	}
	// The schema sees the values templates will see: a `certificate`
	// property holds a PEM only after interpolation.
	if job.Spec.Schema != nil {
		if err := job.Spec.Schema.Validate(job.Name, props); err != nil {
			return err
		}
	}
	job.Properties = props.(*yamlvalue.Map)
	return nil
}

// specs fills every instance's template spec per job.
func specs(deployment string, g *Group) {
	refs := make([]instance.JobRef, len(g.Jobs))
	for i, j := range g.Jobs {
		refs[i] = instance.JobRef{Name: j.Name, Version: j.ReleaseVersion}
	}
	for ii := range g.Instances {
		inst := &g.Instances[ii]
		inst.Specs = make([]*yamlvalue.Map, len(g.Jobs))
		for ji, j := range g.Jobs {
			inst.Specs[ji] = inst.Spec(instance.SpecInput{
				Deployment:     deployment,
				InstanceGroup:  g.Manifest.Name,
				Jobs:           refs,
				PersistentDisk: g.Manifest.PersistentDisk,
				Properties:     j.Properties,
				Links:          j.Links,
				Release:        instance.JobRef{Name: j.Release, Version: j.ReleaseVersion},
			})
		}
	}
}

func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// Package manifest holds a BOSH deployment manifest as typed values, loaded
// from the yamlvalue model after ops files are applied. Property subtrees,
// link intents and other free-form parts stay ordered yamlvalue values, and
// "key absent" is kept apart from "null" where BOSH treats them differently.
// Unknown keys are kept in Raw; wrong shapes are errors naming
// the path, e.g. "instance_groups[1].jobs[0].release: expected a string, got
// a list". Addons are merged into the instance groups they are placed on.
package manifest

import (
	"fmt"
	"strconv"

	"github.com/bosh-injector/bosh-injector/gather/model/boshcli"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Manifest is a deployment manifest.
type Manifest struct {
	Name           string
	Releases       []Release
	Stemcells      []Stemcell
	InstanceGroups []InstanceGroup
	// Properties are the deprecated global properties; nil when absent.
	Properties *yamlvalue.Map
	Variables  []Variable
	Features   *yamlvalue.Map
	Tags       *yamlvalue.Map
	Addons     []Addon
	// Raw is the whole document, unknown keys included.
	Raw *yamlvalue.Map
}

// Release is an entry of `releases`.
type Release struct {
	Name, Version, URL, SHA1 string
	// Image overrides the derived container image when set.
	Image    string
	Stemcell *Stemcell
}

// Stemcell is an entry of `stemcells` or a release's `stemcell`.
type Stemcell struct {
	Alias, OS, Version, Name string
}

// Update modes of a variable, as the director sends them to its config
// server.
const (
	UpdateConverge    = "converge"
	UpdateNoOverwrite = "no-overwrite"
)

// Variable is an entry of `variables`.
type Variable struct {
	Name, Type string
	Options    *yamlvalue.Map
	// Consumes, of a certificate, names links whose group addresses become
	// its common_name or alternative_name; nil when absent.
	Consumes *yamlvalue.Map
	// UpdateMode is how a config server treats an existing value:
	// "converge" regenerates it when the options changed, "no-overwrite"
	// keeps it; "" leaves it to features.converge_variables.
	UpdateMode string
}

// InstanceGroup is an entry of `instance_groups`, addon jobs merged in.
type InstanceGroup struct {
	Name      string
	AZs       []string
	Instances int
	// Lifecycle is "service" (the default) or "errand".
	Lifecycle string
	Jobs      []Job
	// Properties are the deprecated instance-group properties; nil when absent.
	Properties *yamlvalue.Map
	// PersistentDisk is the disk size in MiB, 0 for none.
	PersistentDisk int
	// PersistentDisks are the named disks of `persistent_disks`.
	PersistentDisks []NamedDisk
	Networks        []Network
	Env             *yamlvalue.Map
	Update          *yamlvalue.Map
	Raw             *yamlvalue.Map
}

// Network is an entry of an instance group's `networks`.
type Network struct {
	Name      string
	StaticIPs []string
	Default   []string
}

// Job is a job entry of an instance group (or addon).
type Job struct {
	Name, Release string
	// HasProperties is true when the entry has the key `properties`, which
	// then replaces global and group properties; Properties is nil
	// when that key is null, an error at binding time.
	HasProperties bool
	Properties    *yamlvalue.Map
	// Consumes and Provides are the raw per-link manifest entries (a Hash,
	// the string "nil", or invalid values that link resolution reports).
	Consumes                  *yamlvalue.Map
	Provides                  *yamlvalue.Map
	CustomProviderDefinitions []CustomProvider
	Raw                       *yamlvalue.Map
}

// CustomProvider is an entry of a job's `custom_provider_definitions`.
type CustomProvider struct {
	Name, Type string
	Properties []string
}

// Addon is an entry of `addons`.
type Addon struct {
	Name    string
	Jobs    []Job
	Include *Placement
	Exclude *Placement
}

// Placement is an addon's include or exclude rule. Criteria of different
// kinds must all match; within one list any entry matches.
type Placement struct {
	InstanceGroups []string
	Jobs           []JobRef
	// Lifecycle is "" when not part of the rule.
	Lifecycle string
	AZs       []string
	Networks  []string
	// Stemcells are the operating systems of `stemcell: [{os: …}]`.
	Stemcells []string
}

// JobRef names a job by name and release in a placement rule.
type JobRef struct{ Name, Release string }

// Parse reads a manifest as the director reads it from `bosh deploy`
// (without ops files or interpolation).
func Parse(data []byte) (*Manifest, error) {
	doc, err := boshcli.Document(data, nil)
	if err != nil {
		return nil, err
	}
	return FromDocument(doc)
}

// FromDocument types a manifest document.
func FromDocument(doc any) (*Manifest, error) {
	root, err := asMap(doc, "")
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, fmt.Errorf("manifest is empty")
	}
	m := &Manifest{Raw: root}
	if m.Name, err = str(root, "", "name", true); err != nil {
		return nil, err
	}
	if m.Properties, err = optMap(root, "", "properties"); err != nil {
		return nil, err
	}
	if m.Features, err = optMap(root, "", "features"); err != nil {
		return nil, err
	}
	if m.Tags, err = optMap(root, "", "tags"); err != nil {
		return nil, err
	}
	if err := eachMap(root, "", "stemcells", func(p string, e *yamlvalue.Map) error {
		s, err := stemcell(e, p)
		if s != nil {
			m.Stemcells = append(m.Stemcells, *s)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := eachMap(root, "", "releases", func(p string, e *yamlvalue.Map) error {
		r, err := release(e, p)
		m.Releases = append(m.Releases, r)
		return err
	}); err != nil {
		return nil, err
	}
	if m.Variables, err = variables(root); err != nil {
		return nil, err
	}
	if err := eachMap(root, "", "instance_groups", func(p string, e *yamlvalue.Map) error {
		g, err := instanceGroup(e, p)
		m.InstanceGroups = append(m.InstanceGroups, g)
		return err
	}); err != nil {
		return nil, err
	}
	if err := uniqueGroups(m.InstanceGroups); err != nil {
		return nil, err
	}
	if err := totalInstances(m.InstanceGroups); err != nil {
		return nil, err
	}
	if err := uniqueReleases(m.Releases); err != nil {
		return nil, err
	}
	if err := knownStemcells(m); err != nil {
		return nil, err
	}
	if err := eachMap(root, "", "addons", func(p string, e *yamlvalue.Map) error {
		a, err := addon(e, p)
		m.Addons = append(m.Addons, a)
		return err
	}); err != nil {
		return nil, err
	}
	for _, a := range m.Addons {
		for i := range m.InstanceGroups {
			if a.appliesTo(&m.InstanceGroups[i], groupOS(m, &m.InstanceGroups[i])) {
				m.InstanceGroups[i].Jobs = append(m.InstanceGroups[i].Jobs, a.Jobs...)
			}
		}
	}
	for _, g := range m.InstanceGroups {
		if err := uniqueJobs(g); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// uniqueReleases fails as the director does on two releases of one name:
// which one a job comes from would be ambiguous.
func uniqueReleases(releases []Release) error {
	seen := map[string]bool{}
	for _, r := range releases {
		if seen[r.Name] {
			return fmt.Errorf("Duplicate release name '%s'", r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}

// uniqueJobs fails as the director does on a job colocated twice (addons
// included): both would render into one job directory.
func uniqueJobs(g InstanceGroup) error {
	seen := map[string]bool{}
	for _, j := range g.Jobs {
		if seen[j.Name] {
			return fmt.Errorf("Colocated job '%s' is already added to the instance group '%s'", j.Name, g.Name)
		}
		seen[j.Name] = true
	}
	return nil
}

// knownStemcells fails as the director does on an instance group naming a
// stemcell alias the manifest's stemcells do not define.
func knownStemcells(m *Manifest) error {
	for _, g := range m.InstanceGroups {
		alias, err := g.stemcellAlias()
		if err != nil || alias == "" {
			return err
		}
		if !anyOf(m.Stemcells, func(s Stemcell) bool { return s.Alias == alias }) {
			return fmt.Errorf("Instance group '%s' references an unknown stemcell '%s'", g.Name, alias)
		}
	}
	return nil
}

// uniqueGroups fails as the director does on two instance groups of one
// name, and on two whose Kubernetes names (labels, Secrets, Services) would
// be the same: the second would silently shadow the first.
func uniqueGroups(groups []InstanceGroup) error {
	byName := map[string]string{}
	for _, g := range groups {
		k := names.DNS1123Label(g.Name)
		switch other, taken := byName[k]; {
		case taken && other == g.Name:
			return fmt.Errorf("Duplicate instance group name '%s'", g.Name)
		case taken:
			return fmt.Errorf("Invalid instance group name '%s', canonical name already taken: '%s' has the same Kubernetes name '%s'", g.Name, other, k)
		}
		byName[k] = g.Name
	}
	return nil
}

// Release returns the release of that name, or nil.
func (m *Manifest) Release(name string) *Release {
	for i := range m.Releases {
		if m.Releases[i].Name == name {
			return &m.Releases[i]
		}
	}
	return nil
}

// InstanceGroup returns the instance group of that name, or nil.
func (m *Manifest) InstanceGroup(name string) *InstanceGroup {
	for i := range m.InstanceGroups {
		if m.InstanceGroups[i].Name == name {
			return &m.InstanceGroups[i]
		}
	}
	return nil
}

// ReleaseImage is the container image shipping a release: its `image` if
// set, else `<url>/<name>:<stemcell os>-<stemcell version>-<version>` (the
// fissile convention), the stemcell being the release's own or the
// manifest's only one.
func (m *Manifest) ReleaseImage(name string) (string, error) {
	r := m.Release(name)
	if r == nil {
		return "", fmt.Errorf("release '%s' is not in the manifest's releases", name)
	}
	if r.Image != "" {
		return r.Image, nil
	}
	s := r.Stemcell
	if s == nil {
		if len(m.Stemcells) != 1 {
			return "", fmt.Errorf("cannot derive the image of release '%s': give the release an 'image', or a 'stemcell' (the manifest has %d stemcells, not exactly one)", name, len(m.Stemcells))
		}
		s = &m.Stemcells[0]
	}
	var missing []string
	for _, f := range []struct{ v, n string }{{r.URL, "url"}, {r.Version, "version"}, {s.OS, "stemcell os"}, {s.Version, "stemcell version"}} {
		if f.v == "" {
			missing = append(missing, f.n)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("cannot derive the image of release '%s': no %v; give the release an 'image'", name, missing)
	}
	if r.Version == "latest" || s.Version == "latest" {
		return "", fmt.Errorf("cannot derive the image of release '%s': version 'latest' names no image; give exact versions or an 'image'", name)
	}
	return names.ReleaseImage(r.URL, r.Name, s.OS, s.Version, r.Version), nil
}

// ConvergeVariables is features.converge_variables of a manifest
// document: variables without an update_mode converge.
func ConvergeVariables(doc any) bool {
	root, _ := doc.(*yamlvalue.Map)
	features, _ := root.Get("features")
	m, _ := features.(*yamlvalue.Map)
	v, _ := m.Get("converge_variables")
	return v == true
}

// VariablesOf reads the `variables` section of a manifest document that may
// not be typeable yet: variables must exist before the rest is interpolated.
func VariablesOf(doc any) ([]Variable, error) {
	root, err := asMap(doc, "")
	if err != nil || root == nil {
		return nil, err
	}
	return variables(root)
}

func variables(root *yamlvalue.Map) ([]Variable, error) {
	var vars []Variable
	err := eachMap(root, "", "variables", func(p string, e *yamlvalue.Map) error {
		var v Variable
		var err error
		if v.Name, err = str(e, p, "name", true); err != nil {
			return err
		}
		if v.Type, err = str(e, p, "type", true); err != nil {
			return err
		}
		if v.Options, err = optMap(e, p, "options"); err != nil {
			return err
		}
		if v.Consumes, err = optMap(e, p, "consumes"); err != nil {
			return err
		}
		if v.Consumes != nil && v.Type != "certificate" {
			return fmt.Errorf("%s: only certificate variables may consume links", join(p, "consumes"))
		}
		if v.UpdateMode, err = str(e, p, "update_mode", false); err != nil {
			return err
		}
		if v.UpdateMode != "" && v.UpdateMode != UpdateConverge && v.UpdateMode != UpdateNoOverwrite {
			return fmt.Errorf("%s: must be '%s' or '%s', not '%s'", join(p, "update_mode"), UpdateConverge, UpdateNoOverwrite, v.UpdateMode)
		}
		vars = append(vars, v)
		return nil
	})
	return vars, err
}

func release(e *yamlvalue.Map, p string) (Release, error) {
	var r Release
	var err error
	if r.Name, err = str(e, p, "name", true); err != nil {
		return r, err
	}
	if err := names.PathName("release", r.Name); err != nil {
		return r, err
	}
	if r.Version, err = version(e, p, "version"); err != nil {
		return r, err
	}
	if r.URL, err = str(e, p, "url", false); err != nil {
		return r, err
	}
	if r.SHA1, err = str(e, p, "sha1", false); err != nil {
		return r, err
	}
	if r.Image, err = str(e, p, "image", false); err != nil {
		return r, err
	}
	sm, err := optMap(e, p, "stemcell")
	if err != nil || sm == nil {
		return r, err
	}
	r.Stemcell, err = stemcell(sm, join(p, "stemcell"))
	return r, err
}

func stemcell(e *yamlvalue.Map, p string) (*Stemcell, error) {
	s := &Stemcell{}
	var err error
	if s.Alias, err = str(e, p, "alias", false); err != nil {
		return nil, err
	}
	if s.OS, err = str(e, p, "os", false); err != nil {
		return nil, err
	}
	if s.Name, err = str(e, p, "name", false); err != nil {
		return nil, err
	}
	if s.Version, err = version(e, p, "version"); err != nil {
		return nil, err
	}
	return s, nil
}

// MaxInstances bounds an instance group's instances: each is rendered and
// becomes a pod, and a StatefulSet's replicas are an int32. The largest
// BOSH deployments run a few thousand instances of a group.
const MaxInstances = 10000

func instanceGroup(e *yamlvalue.Map, p string) (InstanceGroup, error) {
	g := InstanceGroup{Raw: e, Lifecycle: "service"}
	var err error
	if g.Name, err = str(e, p, "name", true); err != nil {
		return g, err
	}
	if err := names.PathName("instance group", g.Name); err != nil {
		return g, err
	}
	if g.AZs, err = strList(e, p, "azs"); err != nil {
		return g, err
	}
	if e.Has("azs") && len(g.AZs) == 0 {
		return g, fmt.Errorf("Instance group '%s' has empty availability zones", g.Name)
	}
	if g.Instances, err = integer(e, p, "instances", true); err != nil {
		return g, err
	}
	switch {
	case g.Instances < 0:
		return g, fmt.Errorf("%s: must not be negative", join(p, "instances"))
	case g.Instances > MaxInstances:
		return g, fmt.Errorf("%s: %d is more than the %d instances a group may have", join(p, "instances"), g.Instances, MaxInstances)
	}
	lc, err := str(e, p, "lifecycle", false)
	if err != nil {
		return g, err
	}
	switch lc {
	case "":
	case "service", "errand":
		g.Lifecycle = lc
	default:
		return g, fmt.Errorf("%s: expected 'service' or 'errand', got '%s'", join(p, "lifecycle"), lc)
	}
	if g.Properties, err = optMap(e, p, "properties"); err != nil {
		return g, err
	}
	if g.PersistentDisk, err = integer(e, p, "persistent_disk", false); err != nil {
		return g, err
	}
	if g.PersistentDisk < 0 {
		return g, fmt.Errorf("Instance group '%s' references an invalid persistent disk size '%d'", g.Name, g.PersistentDisk)
	}
	if g.PersistentDisk > MaxMiB {
		return g, fmt.Errorf("Instance group '%s' references an invalid persistent disk size '%d': more MiB than a Kubernetes quantity holds (%d)", g.Name, g.PersistentDisk, MaxMiB)
	}
	if g.PersistentDisks, err = namedDisks(e, p, g.Name); err != nil {
		return g, err
	}
	if g.Env, err = optMap(e, p, "env"); err != nil {
		return g, err
	}
	if g.Update, err = optMap(e, p, "update"); err != nil {
		return g, err
	}
	if err := eachMap(e, p, "networks", func(np string, ne *yamlvalue.Map) error {
		var n Network
		var err error
		if n.Name, err = str(ne, np, "name", true); err != nil {
			return err
		}
		if n.StaticIPs, err = strList(ne, np, "static_ips"); err != nil {
			return err
		}
		n.Default, err = strList(ne, np, "default")
		g.Networks = append(g.Networks, n)
		return err
	}); err != nil {
		return g, err
	}
	err = eachMap(e, p, "jobs", func(jp string, je *yamlvalue.Map) error {
		j, err := job(je, jp)
		g.Jobs = append(g.Jobs, j)
		return err
	})
	return g, err
}

func job(e *yamlvalue.Map, p string) (Job, error) {
	j := Job{Raw: e}
	var err error
	if j.Name, err = str(e, p, "name", true); err != nil {
		return j, err
	}
	if err := names.PathName("job", j.Name); err != nil {
		return j, err
	}
	if j.Release, err = str(e, p, "release", true); err != nil {
		return j, err
	}
	j.HasProperties = e.Has("properties")
	if j.Properties, err = optMap(e, p, "properties"); err != nil {
		return j, err
	}
	if j.Consumes, err = optMap(e, p, "consumes"); err != nil {
		return j, err
	}
	if j.Provides, err = optMap(e, p, "provides"); err != nil {
		return j, err
	}
	err = eachMap(e, p, "custom_provider_definitions", func(cp string, ce *yamlvalue.Map) error {
		var c CustomProvider
		var err error
		if c.Name, err = str(ce, cp, "name", true); err != nil {
			return err
		}
		if c.Type, err = str(ce, cp, "type", true); err != nil {
			return err
		}
		c.Properties, err = strList(ce, cp, "properties")
		j.CustomProviderDefinitions = append(j.CustomProviderDefinitions, c)
		return err
	})
	return j, err
}

func addon(e *yamlvalue.Map, p string) (Addon, error) {
	var a Addon
	var err error
	if a.Name, err = str(e, p, "name", false); err != nil {
		return a, err
	}
	if err := eachMap(e, p, "jobs", func(jp string, je *yamlvalue.Map) error {
		j, err := job(je, jp)
		a.Jobs = append(a.Jobs, j)
		return err
	}); err != nil {
		return a, err
	}
	if a.Include, err = placement(e, p, "include"); err != nil {
		return a, err
	}
	a.Exclude, err = placement(e, p, "exclude")
	return a, err
}

func placement(e *yamlvalue.Map, p, key string) (*Placement, error) {
	pm, err := optMap(e, p, key)
	if err != nil || pm == nil {
		return nil, err
	}
	p = join(p, key)
	pl := &Placement{}
	// A deployment's own addons cannot name deployments; teams they name
	// are ignored, as the director ignores them there.
	if deployments, err := strList(pm, p, "deployments"); err != nil || len(deployments) > 0 {
		if err == nil {
			err = fmt.Errorf("Deployment filter is not allowed for deployment level addons.")
		}
		return nil, err
	}
	if err := eachMap(pm, p, "stemcell", func(sp string, se *yamlvalue.Map) error {
		os, err := str(se, sp, "os", false)
		if err == nil && os == "" {
			err = fmt.Errorf("Stemcell %s in deployment config's %s section must have an os name.", sp, key)
		}
		pl.Stemcells = append(pl.Stemcells, os)
		return err
	}); err != nil {
		return nil, err
	}
	if pl.InstanceGroups, err = strList(pm, p, "instance_groups"); err != nil {
		return nil, err
	}
	if pl.Lifecycle, err = str(pm, p, "lifecycle", false); err != nil {
		return nil, err
	}
	if pl.AZs, err = strList(pm, p, "azs"); err != nil {
		return nil, err
	}
	if pl.Networks, err = strList(pm, p, "networks"); err != nil {
		return nil, err
	}
	err = eachMap(pm, p, "jobs", func(jp string, je *yamlvalue.Map) error {
		var r JobRef
		var err error
		if r.Name, err = str(je, jp, "name", true); err != nil {
			return err
		}
		r.Release, err = str(je, jp, "release", true)
		pl.Jobs = append(pl.Jobs, r)
		return err
	})
	return pl, err
}

// appliesTo says whether the addon goes on group g, whose stemcell's
// operating system is os.
func (a Addon) appliesTo(g *InstanceGroup, os string) bool {
	return a.Include.applies(g, os, true) && !a.Exclude.applies(g, os, false)
}

// applies is the director's addon filter (addon/filter.rb): every
// criterion the rule sets must match the group. A rule with no criterion
// (or none) includes every group and excludes none; an exclude rule of
// only lifecycle, azs, networks or stemcells excludes the groups they
// match.
func (pl *Placement) applies(g *InstanceGroup, os string, include bool) bool {
	if pl == nil {
		return include
	}
	if pl.Lifecycle != "" && pl.Lifecycle != g.Lifecycle {
		return false
	}
	if len(pl.AZs) > 0 && !anyOf(g.AZs, func(az string) bool { return contains(pl.AZs, az) }) {
		return false
	}
	if len(pl.Stemcells) > 0 && !contains(pl.Stemcells, os) {
		return false
	}
	if len(pl.Networks) > 0 && !anyOf(g.Networks, func(n Network) bool { return contains(pl.Networks, n.Name) }) {
		return false
	}
	if len(pl.Jobs) > 0 || len(pl.InstanceGroups) > 0 {
		return (len(pl.InstanceGroups) == 0 || contains(pl.InstanceGroups, g.Name)) &&
			(len(pl.Jobs) == 0 || anyOf(pl.Jobs, func(r JobRef) bool {
				return anyOf(g.Jobs, func(j Job) bool { return j.Name == r.Name && j.Release == r.Release })
			}))
	}
	return include || pl.Lifecycle != "" || len(pl.AZs) > 0 || len(pl.Networks) > 0 || len(pl.Stemcells) > 0
}

// stemcellAlias is the alias of the stemcell g names, "" when none.
func (g *InstanceGroup) stemcellAlias() (string, error) {
	return str(g.Raw, "instance_groups."+g.Name, "stemcell", false)
}

// groupOS is the operating system of g's stemcell: the one its alias
// names, or the manifest's only one when it names none ("" when the
// stemcell is given by name only).
func groupOS(m *Manifest, g *InstanceGroup) string {
	alias, _ := g.stemcellAlias()
	if alias == "" && len(m.Stemcells) == 1 {
		return m.Stemcells[0].OS
	}
	for _, s := range m.Stemcells {
		if s.Alias == alias {
			return s.OS
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	return anyOf(list, func(e string) bool { return e == s })
}

func anyOf[T any](list []T, f func(T) bool) bool {
	for _, e := range list {
		if f(e) {
			return true
		}
	}
	return false
}

// --- shape checking ---

func join(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}

// shape names a value's kind in shape errors.
func shape(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case *yamlvalue.Map:
		return "a hash"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func asMap(v any, p string) (*yamlvalue.Map, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case *yamlvalue.Map:
		return t, nil
	}
	if p == "" {
		return nil, fmt.Errorf("manifest: expected a hash, got %s", shape(v))
	}
	return nil, fmt.Errorf("%s: expected a hash, got %s", p, shape(v))
}

func optMap(e *yamlvalue.Map, p, key string) (*yamlvalue.Map, error) {
	v, _ := e.Get(key)
	return asMap(v, join(p, key))
}

func str(e *yamlvalue.Map, p, key string, required bool) (string, error) {
	v, _ := e.Get(key)
	switch t := v.(type) {
	case string:
		if t == "" && required {
			return "", fmt.Errorf("%s: must not be empty", join(p, key))
		}
		return t, nil
	case nil:
		if required {
			return "", fmt.Errorf("%s: is required", join(p, key))
		}
		return "", nil
	}
	return "", fmt.Errorf("%s: expected a string, got %s", join(p, key), shape(v))
}

// version accepts what YAML types `version: 3` or `1.2` as, as BOSH does.
func version(e *yamlvalue.Map, p, key string) (string, error) {
	v, _ := e.Get(key)
	switch t := v.(type) {
	case int64:
		return strconv.FormatInt(t, 10), nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	}
	return str(e, p, key, false)
}

func integer(e *yamlvalue.Map, p, key string, required bool) (int, error) {
	v, _ := e.Get(key)
	switch t := v.(type) {
	case int64:
		return int(t), nil
	case nil:
		if required {
			return 0, fmt.Errorf("%s: is required", join(p, key))
		}
		return 0, nil
	}
	return 0, fmt.Errorf("%s: expected an integer, got %s", join(p, key), shape(v))
}

func strList(e *yamlvalue.Map, p, key string) ([]string, error) {
	v, _ := e.Get(key)
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: expected a list, got %s", join(p, key), shape(v))
	}
	out := make([]string, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: expected a string, got %s", join(p, key), i, shape(item))
		}
		out[i] = s
	}
	return out, nil
}

// eachMap calls f for every Hash of the list at key, with its path.
func eachMap(e *yamlvalue.Map, p, key string, f func(string, *yamlvalue.Map) error) error {
	v, _ := e.Get(key)
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%s: expected a list, got %s", join(p, key), shape(v))
	}
	for i, item := range list {
		ip := fmt.Sprintf("%s[%d]", join(p, key), i)
		m, ok := item.(*yamlvalue.Map)
		if !ok {
			return fmt.Errorf("%s: expected a hash, got %s", ip, shape(item))
		}
		if err := f(ip, m); err != nil {
			return err
		}
	}
	return nil
}

// HasStoreDisk says whether the group has the disk the agent mounts at
// /var/vcap/store: persistent_disk, or one of a type (persistent_disk_type,
// the older persistent_disk_pool); named disks (persistent_disks) are not
// mounted there.
func (g *InstanceGroup) HasStoreDisk() bool {
	if g.PersistentDisk > 0 {
		return true
	}
	if g.Raw == nil {
		return false
	}
	for _, k := range []string{"persistent_disk_type", "persistent_disk_pool"} {
		if v, _ := g.Raw.Get(k); v != nil && v != "" {
			return true
		}
	}
	return false
}

// EphemeralDiskMB is the group's vm_resources.ephemeral_disk_size in MiB,
// 0 when not given or not a size (objects refuses a malformed
// vm_resources).
func (g *InstanceGroup) EphemeralDiskMB() int {
	if g.Raw == nil {
		return 0
	}
	v, _ := g.Raw.Get("vm_resources")
	vm, ok := v.(*yamlvalue.Map)
	if !ok {
		return 0
	}
	size, _ := vm.Get("ephemeral_disk_size")
	n, ok := size.(int64)
	if !ok || n < 0 || n > MaxMiB {
		return 0
	}
	return int(n)
}

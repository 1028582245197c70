package runner

import (
	"errors"
	"slices"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Inspect reads what the runner needs of a manifest, with its ops files
// applied, without interpolating or generating anything: that is gather's
// job. Only name, releases and stemcells are typed, so a ((variable)) in a
// field typed elsewhere (`instances: ((count))`) does not fail here before
// gather interpolates it.
func Inspect(data []byte, ops []deployment.OpsFile) (Inputs, error) {
	doc, err := deployment.Document(data, ops)
	if err != nil {
		return Inputs{}, err
	}
	root, ok := doc.(*yamlvalue.Map)
	if !ok {
		return Inputs{}, errors.New("manifest: expected a hash at the top level")
	}
	part := yamlvalue.NewMap()
	for _, k := range []string{"name", "releases", "stemcells"} {
		if v, ok := root.Get(k); ok {
			part.Set(k, v)
		}
	}
	m, err := manifest.FromDocument(part)
	if err != nil {
		return Inputs{}, err
	}
	in := Inputs{Name: m.Name}
	var errs []error
	for _, r := range m.Releases {
		image, err := m.ReleaseImage(r.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		in.Releases = append(in.Releases, Release{Name: r.Name, Image: image})
	}
	// The variables referenced and the ones declared (generated even when
	// unused): the gathering's Role names their Secrets.
	in.Variables = variables.Placeholders(doc)
	defs, err := manifest.VariablesOf(doc)
	errs = append(errs, err)
	for _, d := range defs {
		if !slices.Contains(in.Variables, d.Name) {
			in.Variables = append(in.Variables, d.Name)
		}
	}
	in.Plan, err = update.PlanOf(root)
	errs = append(errs, err)
	in.Consumes = consumedDeployments(root)
	in.AliasTargets = aliasTargetDeployments(root)
	return in, errors.Join(errs...)
}

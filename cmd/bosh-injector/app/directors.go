package app

import (
	"github.com/spf13/pflag"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
)

// directorFlags adds the operator's and the config server's flags naming
// directors to f; the returned func reads the per-namespace ones into d
// and checks every name.
func directorFlags(f *pflag.FlagSet, d *director.Directors) func() error {
	f.StringVar(&d.Default, "director-name", "bosh-injector", "director name: a relative ((name)) of deployment D is /<director-name>/D/<name>")
	byNamespace := f.StringArray("namespace-director-name", nil, "NAMESPACE=DIRECTOR (repeatable): the director name of that namespace's deployments instead of --director-name")
	return func() error {
		if err := d.ParseNamespaceDirectors(*byNamespace); err != nil {
			return err
		}
		return d.Validate()
	}
}

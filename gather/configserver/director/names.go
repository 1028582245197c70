// Package director is the director's side of a config server: how the BOSH
// director names a deployment's variables, asks a CredHub-API server for
// them (current, or by the id a deployment recorded) and has it generate
// missing ones. Gathering reads its variables through a Source; the server
// may be the embedded one or any CredHub.
package director

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Name is the config server name of the variable name of deployment, as the
// director names it: an absolute name ("/x") stays as it is, any other is
// "/<director>/<deployment>/<name>".
func Name(director, deployment, name string) string {
	if strings.HasPrefix(name, "/") {
		return name
	}
	return "/" + director + "/" + deployment + "/" + name
}

// nameRule is the characters the director allows in a variable's name
// (the part of a placeholder before its first dot, `!` dropped).
var nameRule = regexp.MustCompile(`^[a-zA-Z0-9_\-/]+$`)

// ValidateName checks a variable's name as the director's
// ConfigServerHelper validates the names of `variables:`, with its
// messages.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("Variable name cannot be empty")
	case !nameRule.MatchString(name):
		return fmt.Errorf("Variable name '%s' must only contain alphanumeric, underscores, dashes, or forward slash characters", name)
	case strings.HasSuffix(name, "/"):
		return fmt.Errorf("Variable name '%s' must not end with a forward slash", name)
	case strings.Contains(name, "//"):
		return fmt.Errorf("Variable name '%s' must not contain two consecutive forward slashes", name)
	}
	return nil
}

// Directors is the director name each namespace's deployments are named
// under: Default, unless ByNamespace names the namespace. One operator may
// so stand in for several directors whose deployments share a CredHub
// (each namespace brings its credentials from its own director). The
// operator's and the server's flags set it, never a namespace's user: a
// director name is what a deployment's token may read.
type Directors struct {
	Default     string
	ByNamespace map[string]string
}

// Of is the director name of namespace's deployments.
func (d Directors) Of(namespace string) string {
	if name, ok := d.ByNamespace[namespace]; ok {
		return name
	}
	return d.Default
}

// ParseNamespaceDirectors reads flag values NAMESPACE=DIRECTOR into
// d.ByNamespace.
func (d *Directors) ParseNamespaceDirectors(values []string) error {
	for _, v := range values {
		ns, name, ok := strings.Cut(v, "=")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("--namespace-director-name: want NAMESPACE=DIRECTOR, got %q", v)
		}
		if d.ByNamespace == nil {
			d.ByNamespace = map[string]string{}
		}
		d.ByNamespace[ns] = name
	}
	return nil
}

// Validate checks every director name as the director checks a variable
// name: a name with a slash would make another's names its own.
func (d Directors) Validate() error {
	for _, name := range append([]string{d.Default}, slices.Sorted(maps.Values(d.ByNamespace))...) {
		if err := ValidateName(name); err != nil {
			return fmt.Errorf("director name: %w", err)
		}
		if strings.Contains(name, "/") {
			return fmt.Errorf("director name %q must not contain a forward slash", name)
		}
	}
	return nil
}

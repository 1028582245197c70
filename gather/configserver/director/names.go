// Package director is the director's side of a config server: how the BOSH
// director names a deployment's variables, asks a CredHub-API server for
// them (current, or by the id a deployment recorded) and has it generate
// missing ones. Gathering reads its variables through a Source; the server
// may be the embedded one or any CredHub.
package director

import (
	"fmt"
	"regexp"
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

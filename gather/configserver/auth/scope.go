package auth

import (
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Scope is the names a caller may read and write.
type Scope struct {
	// Prefix is "/<director>/<deployment>/".
	Prefix string
	// Names are granted absolute names.
	Names []string
}

// Allows reports whether name is in the scope; the empty scope allows
// nothing.
func (s Scope) Allows(name string) bool {
	return (s.Prefix != "" && strings.HasPrefix(name, s.Prefix)) || slices.Contains(s.Names, name)
}

// ScopeOf is the scope of a gathering Job running as sa under directorName:
// its deployment's /<director>/<D>/ and its grants. False when sa is no
// gathering ServiceAccount, so its tokens get nothing.
func ScopeOf(directorName string, sa *corev1.ServiceAccount) (Scope, bool) {
	d := sa.Annotations[director.AnnotationDeployment]
	if d == "" || sa.Labels[names.LabelManagedBy] != names.ManagedBy || sa.Name != names.DNS1123Label(d)+"-gather" {
		return Scope{}, false
	}
	s := Scope{Prefix: director.Name(directorName, d, "")}
	if g := sa.Annotations[director.AnnotationGrants]; g != "" {
		var grants []string
		if json.Unmarshal([]byte(g), &grants) != nil {
			return Scope{}, false
		}
		for _, n := range grants {
			if strings.HasPrefix(n, "/") {
				s.Names = append(s.Names, n)
			}
		}
	}
	return s, true
}

// Caller is an authenticated caller.
type Caller struct {
	// Who names the caller in logs: "client <name>" or "serviceaccount
	// <namespace>/<name>".
	Who         string
	Read, Write bool
	// Scope limits the names a ServiceAccount may use; nil for OAuth
	// clients, which may use every name.
	Scope *Scope
}

// May reports whether the caller may use name.
func (c *Caller) May(name string) bool { return c.Scope == nil || c.Scope.Allows(name) }

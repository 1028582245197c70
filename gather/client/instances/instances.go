// Package instances is the client commands' vocabulary for a deployment's
// instances: an Instance (group, index, uuid) with the names the director
// gives it, and the selectors that name some of them (`group`,
// `group/index`, `group/uuid`, `group/first`) as the director's
// InstanceFilter reads them. The errand and day-2 commands share it.
package instances

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
)

// Instance is one instance of a deployment's instance group.
type Instance struct {
	Group string
	Index int
	ID    string
}

// String is the instance's "group/index", as errands name it.
func (i Instance) String() string { return instance.IndexName(i.Group, i.Index) }

// Name is the director's name of the instance, "group/uuid".
func (i Instance) Name() string { return instance.Name(i.Group, i.ID) }

// FullName is the director's full name of the instance, "group/uuid
// (index)".
func (i Instance) FullName() string { return instance.FullName(i.Group, i.ID, i.Index) }

// Filter is an instance selector (an --instance argument, an instance
// spec): `group`, `group/index`, `group/id` or `group/first`.
type Filter struct{ Group, IndexOrID string }

// ParseFilter reads an instance selector.
func ParseFilter(s string) (Filter, error) {
	group, id, _ := strings.Cut(s, "/")
	if group == "" || strings.Contains(id, "/") {
		return Filter{}, fmt.Errorf("instance %q: want an instance group, group/index, group/id or group/first", s)
	}
	return Filter{Group: group, IndexOrID: id}, nil
}

// ParseSpec reads an instance spec: "group", "group/index" or
// "group/uuid"; "" is the whole deployment.
func ParseSpec(spec string) ([]Filter, error) {
	if spec == "" {
		return nil, nil
	}
	f, err := ParseFilter(spec)
	if err != nil {
		return nil, err
	}
	return []Filter{f}, nil
}

func (f Filter) String() string {
	if f.IndexOrID == "" {
		return f.Group
	}
	return f.Group + "/" + f.IndexOrID
}

// Matches is the director's InstanceFilter#matches?: "first" is the
// group's instance with the lowest id, as the director sorts its UUIDs.
func (f Filter) Matches(in Instance, all []Instance) bool {
	if in.Group != f.Group {
		return false
	}
	switch f.IndexOrID {
	case "":
		return true
	case "first":
		var ids []string
		for _, o := range all {
			if o.Group == f.Group {
				ids = append(ids, o.ID)
			}
		}
		return slices.Min(ids) == in.ID
	}
	return in.ID == f.IndexOrID || strconv.Itoa(in.Index) == f.IndexOrID
}

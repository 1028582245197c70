package instance

import "strconv"

// The director names an instance three ways; these are the one spelling
// of each.

// Name is "group/uuid", how `bosh instances`, logs and ssh name an
// instance.
func Name(group, id string) string { return group + "/" + id }

// FullName is "group/uuid (index)", how an update's progress and an
// orphaned disk name an instance.
func FullName(group, id string, index int) string {
	return Name(group, id) + " (" + strconv.Itoa(index) + ")"
}

// IndexName is "group/index", how errands and an update's failures name an
// instance.
func IndexName(group string, index int) string { return group + "/" + strconv.Itoa(index) }

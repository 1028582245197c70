package names

import (
	"strconv"
	"strings"
)

// The StatefulSet controller names its pods "<set>-<ordinal>" and their
// claims "<template>-<set>-<ordinal>"; PodName writes a pod's, the others read the ordinal back from a
// name, for the webhook, the deploy controller and the disk controller
// alike.

// PodName is the name the StatefulSet controller gives set's pod of an
// ordinal, "<set>-<ordinal>", which Ordinal and OrdinalIn read back.
func PodName(set string, ordinal int) string { return set + "-" + strconv.Itoa(ordinal) }

// Ordinal is the number a StatefulSet's pod or claim name ends with,
// "...-<ordinal>".
func Ordinal(name string) (int, bool) {
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	return n, i >= 0 && err == nil && n >= 0
}

// OrdinalIn is the ordinal of pod name in StatefulSet set,
// "<set>-<ordinal>" (of a claim name, set being "<template>-<set>"); ok is
// false for another set's pod, whose name may start with set's.
func OrdinalIn(set, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, set+"-")
	if !ok || strings.Contains(rest, "-") {
		return 0, false
	}
	return Ordinal(name)
}

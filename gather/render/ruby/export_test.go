package ruby

// PIDNamespaces says whether renders start Ruby in a PID namespace of its
// own (false once the kernel or the runtime refused one).
func PIDNamespaces() bool { return !noPIDNamespace.Load() }

package bpm

// WarnOpenFiles: BPM's runc, root on the VM, sets limits.open_files as the
// process's hard limit whatever the VM's; a container's root cannot raise
// its hard limit (no CAP_SYS_RESOURCE), so the launcher applies it up to
// the limit the node's container runtime gives.
const WarnOpenFiles = "limits.open_files is applied up to the hard limit the node's container runtime gives containers (only CAP_SYS_RESOURCE may raise it, as BPM's runc does as root on the VM); where that is lower, the process runs with it and its stderr log says so"

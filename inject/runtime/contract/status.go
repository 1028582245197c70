package contract

// Status is what the launcher's `status` command reports of its instance,
// read from the state directory every process container shares: the
// director's `bosh instances --ps` asks the agent the same of monit.
type Status struct {
	// Setup says the instance's setup (render, the pre-start steps)
	// ended in this boot.
	Setup bool `json:"setup"`
	// Processes are the instance's process containers in plan order.
	Processes []ProcessStatus `json:"processes"`
	// Failed are the lifecycle scripts that failed, by job: post-start
	// makes the instance failing, as the director marks it.
	Failed []ScriptFailure `json:"failed,omitempty"`
	// Pending are the jobs whose post-start has not finished: the
	// instance is starting until it has.
	Pending []string `json:"pending,omitempty"`
}

// ProcessStatus is one process container's process as its launcher
// recorded it.
type ProcessStatus struct {
	Container string `json:"container"`
	State     string `json:"state"`
	// Restarts is how many times the launcher started the process again
	// in its container after it exited, as monit does (since the
	// container or the instance's last start).
	Restarts int `json:"restarts,omitempty"`
	// LastExit is the process's last exit then, if it exited.
	LastExit *Exit `json:"last_exit,omitempty"`
}

// Exit is how a process ended: its exit code (128 plus the signal's number
// when a signal ended it, as a shell says), the signal, and the end of its
// stderr (or why it could not start).
type Exit struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	Tail   string `json:"tail,omitempty"`
}

// ScriptFailure is a lifecycle script that failed, with its message.
type ScriptFailure struct {
	Job     string `json:"job"`
	Script  string `json:"script"`
	Message string `json:"message"`
}

// Process states, in the director's words (`bosh instances`' Process
// State).
const (
	StateRunning  = "running"
	StateStarting = "starting"
	StateStopped  = "stopped"
	StateFailing  = "failing"
)

// Launcher commands the day-2 CLI commands exec in a process container:
// Status prints the Status as JSON, LogArchive writes /var/vcap/sys/log
// as a gzipped tarball to stdout, Shell runs a shell or a command as vcap
// (or root).
const (
	StatusCommand = "status"
	LogArchive    = "log-archive"
	Shell         = "shell"
)

package runtime

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// exitRecord is what the launcher of a service process records when the
// process exits, read by Status.
type exitRecord struct {
	Restarts int           `json:"restarts"`
	LastExit contract.Exit `json:"last_exit"`
}

func exitedFile(container string) string { return container + ".exited" }

// exitOf reads a container's exit record, if its process exited.
func (in Instance) exitOf(container string) (exitRecord, bool) {
	var rec exitRecord
	data, ok := in.State.Read(exitedFile(container))
	return rec, ok && json.Unmarshal([]byte(data), &rec) == nil
}

// lastExit says how the container's process last exited, for a readiness
// probe's answer, which the deploy's verdict quotes: the container itself
// does not end, so it has no termination message. It never quotes what
// the process printed, which may be anything: the answer reaches Events,
// the pod network and the manifest's status; logs and `instances --ps`
// have it.
func (in Instance) lastExit() string {
	rec, ok := in.exitOf(in.Plan.Container)
	if !ok {
		return ""
	}
	how := fmt.Sprintf("exited %d", rec.LastExit.Code)
	if rec.LastExit.Signal != "" {
		how = "killed by " + rec.LastExit.Signal
	}
	out := ": it " + how
	if rec.Restarts > 0 {
		out += fmt.Sprintf(" (started again in its container %d times, as monit does)", rec.Restarts)
	}
	return out
}

// exitTail bounds what a process's exit record keeps of its stderr.
const (
	exitTailBytes = 1024
	exitTailLines = 5
)

// tailBuffer keeps the end of what a process writes to stderr (the
// command's copying goroutines write to it).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - exitTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Reset forgets what a previous start wrote.
func (t *tailBuffer) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = t.buf[:0]
}

// Lines are the last lines written.
func (t *tailBuffer) Lines() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(strings.TrimSpace(string(t.buf)), exitTailLines)
}

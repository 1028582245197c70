package runtime

import (
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

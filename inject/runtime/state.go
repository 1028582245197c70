// Package runtime is the BOSH job runtime inside an injected pod: the
// launcher every process container starts with (what BPM does for a
// process), the instance's lifecycle scripts in BOSH's order and with the
// agent's contracts, and the probes the kubelet runs. Containers of one
// instance coordinate through files in a directory they share
// (contract.StateDir).
package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// State is the instance's shared state directory.
type State struct{ Dir string }

// pollInterval is how often waiters look at the state directory.
const pollInterval = 200 * time.Millisecond

// Mark records name with content.
func (s State) Mark(name, content string) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(s.Dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.Dir, name))
}

// Read returns name's content and whether it exists.
func (s State) Read(name string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(s.Dir, name))
	return string(data), err == nil
}

// Age is how long ago name was last written, and whether it exists.
func (s State) Age(name string) (time.Duration, bool) {
	fi, err := os.Stat(filepath.Join(s.Dir, name))
	if err != nil {
		return 0, false
	}
	return time.Since(fi.ModTime()), true
}

// Remove removes name.
func (s State) Remove(name string) error {
	err := os.Remove(filepath.Join(s.Dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Claim creates name unless it exists, and says whether this call created
// it: of several containers' hooks, one runs a script.
func (s State) Claim(name string) (bool, error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return false, err
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, f.Close()
}

// WaitAll waits until every name exists, or ctx ends; it returns the names
// still missing then.
func (s State) WaitAll(ctx context.Context, names []string) []string {
	for {
		var missing []string
		for _, n := range names {
			if _, ok := s.Read(n); !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return missing
		case <-time.After(pollInterval):
		}
	}
}

// State file names. stoppingFile marks the instance's stop begun (its
// pre-stop and drain): no exited process is started again.
const stoppingFile = "instance.stopping"

func startingFile(container string) string { return container + ".starting" }
func pidFile(container string) string      { return container + ".pid" }
func stoppedFile(container string) string  { return container + ".stopped" }
func okFile(script, job string) string {
	return strings.ReplaceAll(script, "/", "-") + "-" + job + ".ok"
}
func failedFile(script, job string) string {
	return strings.ReplaceAll(script, "/", "-") + "-" + job + ".failed"
}

// failureRecord is a failed script's file: its error, then on the next
// line its output's end.
func failureRecord(err error, output string) string { return err.Error() + "\n" + output }

func claimFile(script, job string) string {
	return strings.ReplaceAll(script, "/", "-") + "-" + job + ".started"
}

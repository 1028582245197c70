package runtime

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The launcher is its container's init, as runc's init is under BPM: the
// orphans of its process tree (a daemon's double fork, a script's
// background child) become its children, and without a wait they stay
// zombies for the container's life. It reaps them, but never one of its own
// children, whose status exec.Cmd.Wait is owed: every child starts under
// the read lock and is known before the lock is let go, and a reaping pass
// holds the write lock, so an unknown child at that moment is an orphan.
var children struct {
	starting sync.RWMutex
	own      sync.Map // pid -> struct{}
}

// startChild starts cmd as a known child.
func startChild(cmd *exec.Cmd) error {
	children.starting.RLock()
	defer children.starting.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	children.own.Store(cmd.Process.Pid, struct{}{})
	return nil
}

// waitChild waits for a child startChild started.
func waitChild(cmd *exec.Cmd) error {
	err := cmd.Wait()
	children.own.Delete(cmd.Process.Pid)
	return err
}

// runChild is startChild then waitChild.
func runChild(cmd *exec.Cmd) error {
	if err := startChild(cmd); err != nil {
		return err
	}
	return waitChild(cmd)
}

// ReapOrphans makes this process the reaper of its descendants' orphans
// (its container's init is, and a subreaper also is where a pod shares one
// PID namespace) and reaps them as they end, until stop is called.
func ReapOrphans() (stop func(), err error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				reapPass()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}, nil
}

// reapPass waits for every zombie child that is not a known one.
func reapPass() {
	children.starting.Lock()
	defer children.starting.Unlock()
	for _, pid := range zombieChildren(os.Getpid()) {
		if _, own := children.own.Load(pid); !own {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// zombieChildren are the zombie processes whose parent is ppid.
func zombieChildren(ppid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// After the parenthesised command name: state, then ppid.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) < 2 || fields[0] != "Z" || fields[1] != strconv.Itoa(ppid) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

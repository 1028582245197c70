package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/test/cluster"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

// A kept sandbox (`make demo … KEEP=1`) runs in a process of its own,
// detached from the terminal, and leaves its state in a directory that
// `make demo-down` reads: the process holds the cluster, and stops it on
// SIGTERM.

const (
	stateFile = "state.json"
	logFile   = "sandbox.log"
)

// DefaultDir is where kept sandbox name's state is, unless told otherwise:
// each name is a sandbox of its own, "" the default one (`make demo
// SANDBOX=name`).
func DefaultDir(name string) (string, error) {
	dir := filepath.Join(os.TempDir(), "bosh-injector-sandbox")
	if name == "" {
		return dir, nil
	}
	if err := names.PathName("sandbox", name); err != nil {
		return "", fmt.Errorf("SANDBOX=%s: %w", name, err)
	}
	return dir + "-" + name, nil
}

// Background runs this program again with args, detached, as the kept
// sandbox of state directory dir (args must make it call Run with
// Ready: Keep(dir, …)); it streams the sandbox's output to out until the
// report is out and returns, leaving the sandbox up. When the sandbox fails
// instead, what it left is removed.
func Background(out io.Writer, dir string, args []string) error {
	if st, err := readState(dir); err == nil {
		if alive(st) {
			return fmt.Errorf("a sandbox is running already (pid %d, state in %s): stop it with `make demo-down`, or run another beside it with SANDBOX=name", st.Pid, dir)
		}
		if err := Down(out, dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, logFile))
	if err != nil {
		return err
	}
	defer log.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	// Down finds the process from here on, even if it fails before it
	// is ready.
	if err := writeState(dir, State{Pid: cmd.Process.Pid, StartTime: startTime(cmd.Process.Pid)}); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	follow, err := os.Open(log.Name())
	if err != nil {
		return err
	}
	defer follow.Close()
	for {
		_, _ = io.Copy(out, follow)
		select {
		case err := <-exited:
			_, _ = io.Copy(out, follow)
			return errors.Join(fmt.Errorf("the sandbox failed: %v", err), Down(io.Discard, dir))
		case <-time.After(200 * time.Millisecond):
		}
		if st, err := readState(dir); err == nil && st.Ready {
			_, _ = io.Copy(out, follow)
			return nil
		}
	}
}

// Keep is the Ready of a kept sandbox with state directory dir: it says how
// to use the sandbox, then records it as ready.
func Keep(dir string, out io.Writer) func(State) error {
	return func(st State) error {
		bin, err := controlplane.BinDir()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\nThe sandbox stays up in the background (pid %d). Use it with kubectl:\n", st.Pid)
		fmt.Fprintf(out, "   export KUBECONFIG=%s\n", st.Kubeconfig)
		fmt.Fprintf(out, "   %s get pods --namespace %s   # the kubectl `make testbin` built; any kubectl works\n", filepath.Join(bin, "kubectl"), st.Namespace)
		fmt.Fprintln(out, "Pods you create or change there run on its node too. Processes' ports are reached as the report says.")
		fmt.Fprintf(out, "Stop it with `make demo-down` (state in %s, log in %s).\n", dir, filepath.Join(dir, logFile))
		st.StartTime = startTime(st.Pid)
		return writeState(dir, st)
	}
}

// Down stops the kept sandbox of state directory dir and removes what it
// left: its processes, its cluster, its directories.
func Down(out io.Writer, dir string) error {
	st, err := readState(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "no sandbox is running (no %s)\n", filepath.Join(dir, stateFile))
		return os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	if alive(st) {
		// Its children die with it (the cluster's by pdeathsig); any
		// that would not are killed after.
		family := descendants(st.Pid)
		fmt.Fprintf(out, "stopping the sandbox (pid %d)\n", st.Pid)
		_ = syscall.Kill(st.Pid, syscall.SIGTERM)
		for deadline := time.Now().Add(2 * time.Minute); alive(st) && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
		}
		if alive(st) {
			_ = syscall.Kill(st.Pid, syscall.SIGKILL)
		}
		for _, pid := range family {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// A cluster whose process was killed before it could stop it.
	downed, err := cluster.Down()
	for _, d := range downed {
		fmt.Fprintf(out, "removed %s\n", d)
	}
	errs := []error{err}
	if st.Dir != "" {
		errs = append(errs, os.RemoveAll(st.Dir))
	}
	errs = append(errs, os.RemoveAll(dir))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintln(out, "the sandbox is down")
	return nil
}

func writeState(dir string, st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".new")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

func readState(dir string) (State, error) {
	var st State
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(data, &st)
}

// alive says the sandbox's process runs: its pid exists, is not a zombie
// and started when the state says (not a later process with the pid).
func alive(st State) bool {
	stat, err := procStat(st.Pid)
	return err == nil && stat[0] != "Z" && stat[19] == st.StartTime
}

// startTime is a process's start time in clock ticks since boot.
func startTime(pid int) string {
	if stat, err := procStat(pid); err == nil {
		return stat[19]
	}
	return ""
}

// procStat is /proc/<pid>/stat from the state field on (the command,
// which may hold spaces, is cut off): [0] state, [1] ppid, [19] start time.
func procStat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, data)
	}
	return f, nil
}

// descendants are the processes below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if stat, err := procStat(p); err == nil {
			ppid, _ := strconv.Atoi(stat[1])
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

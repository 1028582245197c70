package runtime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReapOrphans runs, in a process of its own (a subreaper is one for
// the whole process), children that leave background children behind: the
// orphans become this process's children and are reaped once they end,
// while every known child's exit status still reaches its Wait.
func TestReapOrphans(t *testing.T) {
	if os.Getenv("REAP_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReapOrphans$", "-test.v")
		cmd.Env = append(os.Environ(), "REAP_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestReapOrphans") {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	stop, err := ReapOrphans()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	cmd := exec.Command("/bin/sh", "-c", "sleep 0.3 & echo $!; exit 3")
	var out strings.Builder
	cmd.Stdout = &out
	var exit *exec.ExitError
	if err := runChild(cmd); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("the child's own status: %v", err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	if ppid := parentOf(orphan); ppid != os.Getpid() {
		t.Fatalf("orphan %d has parent %d, not this process %d", orphan, ppid, os.Getpid())
	}
	deadline := time.Now().Add(5 * time.Second)
	for parentOf(orphan) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d was not reaped: %v", orphan, zombieChildren(os.Getpid()))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Known children and orphans ending at once: no Wait loses its status.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("sleep 0.0%d & exit %d", i%10, i%7))
			err := runChild(cmd)
			if code := cmd.ProcessState.ExitCode(); code != i%7 {
				errs <- fmt.Errorf("child %d: exit code %d (%v), want %d", i, code, err, i%7)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for len(zombieChildren(os.Getpid())) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("zombies left: %v", zombieChildren(os.Getpid()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// parentOf is pid's parent, 0 when pid is gone.
func parentOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

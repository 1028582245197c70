package ruby

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Templates are release code: in the gathering they run beside the API
// token the gathering writes Secrets with. Confine hides such paths from
// every later Ruby process of this one with Landlock: the process may read
// everything but them, and cannot ptrace its way into this process's memory
// either (Landlock confines ptrace to the same or nested domains). It is a
// property of the process running release code, so it is set once, by the
// command that does (gather), rather than passed down to each render.
func Confine(hidden ...string) error {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return fmt.Errorf("hiding %s from templates: the kernel offers no Landlock: %w", strings.Join(hidden, ", "), err)
	}
	if abi < 1 {
		return fmt.Errorf("hiding %s from templates: Landlock ABI %d", strings.Join(hidden, ", "), abi)
	}
	readable, err := readableExcept(hidden)
	if err != nil {
		return fmt.Errorf("hiding %s from templates: %w", strings.Join(hidden, ", "), err)
	}
	confinement.Lock()
	defer confinement.Unlock()
	confinement.readable = readable
	return nil
}

// What gather logs of its templates' confinement (the walkthrough narrates
// it).
const (
	Confined   = "release templates render confined by Landlock: they cannot read the gathering's API token"
	Unconfined = "warning: release templates render where they can read the gathering's API token"
)

var confinement struct {
	sync.Mutex
	readable []string
}

// readableExcept covers the file system but the hidden paths with rules:
// at each directory on the way from / to a hidden path, its other entries.
// A symbolic link leading to a hidden path or to a directory on the way
// gets no rule (its target is covered by its real path).
func readableExcept(hidden []string) ([]string, error) {
	var real []string
	for _, h := range hidden {
		r, err := filepath.EvalSymlinks(h)
		if err != nil {
			return nil, err
		}
		real = append(real, r)
	}
	within := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/" }
	var out []string
	var walk func(dir string) error
	walk = func(dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			r, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue // a dangling link reads nothing
			}
			hides, onTheWay := false, false
			for _, h := range real {
				hides = hides || within(r, h)
				onTheWay = onTheWay || within(h, r)
			}
			switch {
			case hides:
			case onTheWay:
				if r == p {
					if err := walk(p); err != nil {
						return err
					}
				}
			default:
				out = append(out, p)
			}
		}
		return nil
	}
	return out, walk("/")
}

const readAccess = llsys.AccessFSReadFile | llsys.AccessFSReadDir

// start starts cmd confined when Confine was called. The thread that forks
// takes the Landlock domain and passes it to the child; it is never given
// back to the Go scheduler, so it ends with its goroutine and nothing else
// of this process runs confined.
func start(cmd *exec.Cmd) error {
	confinement.Lock()
	readable := confinement.readable
	confinement.Unlock()
	if readable == nil {
		return cmd.Start()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := restrictThread(readable); err != nil {
			done <- err
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}

func restrictThread(readable []string) error {
	ruleset, err := llsys.LandlockCreateRuleset(&llsys.RulesetAttr{HandledAccessFS: readAccess}, 0)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	defer unix.Close(ruleset)
	for _, p := range readable {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // gone since Confine
			}
			return fmt.Errorf("landlock rule for %s: %w", p, err)
		}
		var st unix.Stat_t
		access := uint64(readAccess)
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access = llsys.AccessFSReadFile // a file takes file rights only
		}
		err = llsys.LandlockAddPathBeneathRule(ruleset, &llsys.PathBeneathAttr{AllowedAccess: access, ParentFd: fd}, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("landlock rule for %s: %w", p, err)
		}
	}
	// Only this thread: no_new_privs and the domain pass to the child.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(ruleset, 0); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

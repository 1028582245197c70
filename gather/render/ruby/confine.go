package ruby

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Confinement is what a render's Ruby process may do, enforced by
// Landlock: read only what it names (directories with everything below,
// files), execute only Ruby itself (not a shell: system, backticks and
// exec fail), write, create or remove no file, open no socket (see
// sockets.go) and signal no process outside the render. Its results travel on the pipes it
// inherits. The thread that starts Ruby takes the Landlock domain and
// passes it to the child; it is never given back to the Go scheduler, so
// nothing else of this process runs confined.
type Confinement struct {
	readable []string
	exec     []string
	abi      int
}

// Confine is the gathering's confinement: templates are release code and
// run beside the API token the gathering writes Secrets with, so the hidden
// paths are the only ones they cannot read; nor can they ptrace their way
// into this process's memory (Landlock confines ptrace to the same or
// nested domains).
func Confine(hidden ...string) (*Confinement, error) {
	what := "hiding " + strings.Join(hidden, ", ") + " from templates"
	c, err := newConfinement()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if c.readable, err = readableExcept(hidden); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return c, nil
}

// ConfineOffline is the confinement of a render on a user's machine: Ruby
// reads what it and its libraries need (rubyReads) and what readable names
// (the releases), nothing of the user's or the system's configuration.
func ConfineOffline(readable ...string) (*Confinement, error) {
	c, err := newConfinement()
	if err != nil {
		return nil, fmt.Errorf("confining release templates: %w", err)
	}
	needs, err := rubyReads(c.exec[0])
	if err != nil {
		return nil, fmt.Errorf("confining release templates: %w", err)
	}
	system := []string{"/etc/ld.so.cache", "/etc/localtime", "/etc/ssl/openssl.cnf", "/etc/ssl/certs", "/dev/null", "/dev/urandom"}
	for _, p := range slices.Concat(needs, system, readable) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			c.readable = append(c.readable, r)
		}
	}
	return c, nil
}

// requires are the libraries context.rb loads.
var requires = regexp.MustCompile(`(?m)^require "([\w/]+)"$`)

// rubyReads asks Ruby, once it has loaded what context.rb requires, for
// its load path and the directories of the files it mapped (its shared
// libraries, encodings, locale): what a render reads besides templates.
func rubyReads(bin string) ([]string, error) {
	var script strings.Builder
	for _, m := range requires.FindAllStringSubmatch(contextScript, -1) {
		fmt.Fprintf(&script, "require %q\n", m[1])
	}
	script.WriteString(`maps = File.readlines("/proc/self/maps").map { |l| l.split[5] }.compact.grep(%r{\A/}).map { |f| File.dirname(f) }
print(($LOAD_PATH + maps).uniq.join("\0"))`)
	cmd := exec.Command(bin, "--disable-gems", "-e", script.String())
	cmd.Env = minimalEnv
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("asking %s what it reads: %w", bin, err)
	}
	return strings.Split(string(out), "\x00"), nil
}

// What gather logs of its templates' confinement (the walkthrough narrates
// it), and what template and objects warn without one.
const (
	Confined          = "release templates render confined by Landlock: they cannot read the gathering's API token, write files or run programs"
	Unconfined        = "warning: release templates render where they can read the gathering's API token"
	OfflineUnconfined = "Warning: release templates render unconfined, with your access to files and programs"
)

// newConfinement checks Landlock and finds Ruby and its ELF interpreter,
// the only programs a confined render executes.
func newConfinement() (*Confinement, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return nil, fmt.Errorf("the kernel offers no Landlock: %w", err)
	}
	if abi < 1 {
		return nil, fmt.Errorf("the kernel offers Landlock ABI %d", abi)
	}
	bin, err := exec.LookPath("ruby")
	if err != nil {
		return nil, ErrNoRuby
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return nil, err
	}
	c := &Confinement{exec: []string{bin}, abi: abi}
	if f, err := elf.Open(bin); err == nil {
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			data, err := io.ReadAll(p.Open())
			if err == nil {
				if interp, err := filepath.EvalSymlinks(strings.TrimRight(string(data), "\x00")); err == nil {
					c.exec = append(c.exec, interp)
				}
			}
		}
		f.Close()
	}
	return c, nil
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

// handled is every access right of the kernel's Landlock ABI: what no rule
// grants is denied.
func (c *Confinement) handled() llsys.RulesetAttr {
	attr := llsys.RulesetAttr{HandledAccessFS: llsys.AccessFSMakeSym<<1 - 1}
	if c.abi >= 2 {
		attr.HandledAccessFS |= llsys.AccessFSRefer
	}
	if c.abi >= 3 {
		attr.HandledAccessFS |= llsys.AccessFSTruncate
	}
	if c.abi >= 4 {
		attr.HandledAccessNet = llsys.AccessNetBindTCP | llsys.AccessNetConnectTCP
	}
	if c.abi >= 5 {
		attr.HandledAccessFS |= llsys.AccessFSIoctlDev
	}
	if c.abi >= 6 {
		attr.Scoped = llsys.ScopeAbstractUnixSocket | llsys.ScopeSignal
	}
	return attr
}

// start starts cmd, confined by c when set.
func start(cmd *exec.Cmd, c *Confinement) error {
	if c == nil {
		return cmd.Start()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := c.restrictThread(); err != nil {
			done <- err
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}

func (c *Confinement) restrictThread() error {
	attr := c.handled()
	ruleset, err := llsys.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	defer unix.Close(ruleset)
	rules := map[string]uint64{}
	for _, p := range c.readable {
		rules[p] |= readAccess
	}
	for _, p := range c.exec {
		rules[p] |= llsys.AccessFSExecute | llsys.AccessFSReadFile
	}
	for p, access := range rules {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // gone since the confinement was made
			}
			return fmt.Errorf("landlock rule for %s: %w", p, err)
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access &^= llsys.AccessFSReadDir // a file takes file rights only
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
	return denySockets()
}

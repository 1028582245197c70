package ruby

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The results protocol. Ruby reads the batch on stdin and writes frames on
// descriptor 3, a pipe of their own: what templates print (stdout, stderr)
// goes to a log and never mixes with results. A frame is a tag byte, a
// big-endian uint64 length and that many bytes:
//
//	'S' (empty)      the next template starts
//	'C' content      its rendered output
//	'E' message      its director-format error
//	'Z' (empty)      the batch is done
//
// The start frames say which template was being rendered when Ruby ends or
// is killed; the length of a result is checked before it is read, so no
// output beyond the limit is ever held.
const (
	frameStart   = 'S'
	frameContent = 'C'
	frameError   = 'E'
	frameDone    = 'Z'
)

// logTail is how much of Ruby's own output is kept for an error that no
// template explains.
const logTail = 4 << 10

// drainWait is how long the results and the log are read after Ruby ended
// and its process group was killed: a process that left the group may hold
// the pipes open, and the render does not wait for it.
const drainWait = time.Second

// maxMemory bounds Ruby's address space (RLIMIT_AS): a template that
// allocates past it fails with NoMemoryError instead of exhausting the
// machine. Ruby with context.rb's libraries maps under 100 MiB.
const maxMemory = 1 << 30

// maxBatchOutput bounds the output of all templates of a batch, which is
// held until written: a deployment's renders are a few MiB to a few
// hundred.
const maxBatchOutput = 512 << 20

// minimalEnv is all of the environment Ruby gets: nothing of the caller's
// (tokens, proxies) reaches templates or their errors.
var minimalEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}

// noPIDNamespace is set once starting Ruby in a PID namespace of its own
// failed.
var noPIDNamespace atomic.Bool

// failure is a render ended before its last result: at the template the
// last start frame announced (job -1 before the first).
type failure struct {
	job, template int
	message       string
	timeout       bool
	log           string
}

func (f *failure) Error() string { return f.message }

// named is f in the director's format, naming the group, job and template.
func (f *failure) named(jobs []Job) error {
	if f.job < 0 && f.log == "" {
		return fmt.Errorf("ruby: %s before rendering any template", f.message)
	}
	if f.job < 0 {
		return fmt.Errorf("ruby: %s before rendering any template: %s", f.message, f.log)
	}
	j := jobs[f.job]
	line := fmt.Sprintf("Error filling in template '%s' (%s)", j.Templates[f.template].Name, f.message)
	return errors.New(GroupError(j.Group, []JobErrors{{Job: j.Name, Templates: []string{line}}}))
}

// run renders input (the marshalled jobs) in a Ruby process of its own
// process group, confined by c when set; the group is killed when the
// results are complete, when Ruby ends, and when ctx ends, so nothing a
// template started outlives the render.
func run(ctx context.Context, c *Confinement, bin string, input []byte, jobs []Job, limit int) ([][]Output, error) {
	var pipes [6]*os.File // stdin r/w, results r/w, log r/w
	for i := 0; i < len(pipes); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(pipes[:i])
			return nil, err
		}
		pipes[i], pipes[i+1] = r, w
	}
	stdinR, stdinW, resR, resW, logR, logW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	defer closeAll([]*os.File{stdinW, resR, logR})
	command := func(isolate bool) *exec.Cmd {
		// UTF-8 whatever the locale (containers often have none); gems are
		// not needed, and skipping them halves Ruby's start-up.
		cmd := exec.Command(bin, "--disable-gems", "-E", "UTF-8:UTF-8", "-e", contextScript, strconv.Itoa(limit))
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, logW, logW
		cmd.Env = minimalEnv
		cmd.ExtraFiles = []*os.File{resW}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if isolate {
			// Ruby as the first process of a PID namespace: when it dies,
			// the kernel kills every process it started, even one that
			// left its process group. The user namespace that lets a user
			// make one maps no ID (a confined thread cannot write the
			// maps): Ruby keeps the user's access to files and sees itself
			// as nobody.
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID
		}
		return cmd
	}
	cmd := command(!noPIDNamespace.Load())
	err := start(cmd, c)
	if refused := []error{syscall.EPERM, syscall.EACCES, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS}; err != nil && !noPIDNamespace.Load() &&
		slices.ContainsFunc(refused, func(e error) bool { return errors.Is(err, e) }) {
		// User namespaces refused (a container runtime's seccomp profile,
		// a sysctl): the process group alone, from now on.
		noPIDNamespace.Store(true)
		cmd = command(false)
		err = start(cmd, c)
	}
	closeAll([]*os.File{stdinR, resW, logW}) // Ruby's ends
	if err != nil {
		return nil, fmt.Errorf("starting ruby: %w", err)
	}
	killGroup := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Templates run only once Ruby reads the batch, which is written
	// below: the bound is in place before any of them.
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: maxMemory, Max: maxMemory}, nil); err != nil {
		killGroup()
		_ = cmd.Wait()
		return nil, fmt.Errorf("bounding ruby's memory: %w", err)
	}

	go func() {
		_, _ = stdinW.Write(input) // fails once Ruby is gone, which the results tell
		_ = stdinW.Close()
	}()
	log := &tail{}
	logged := make(chan struct{})
	go func() {
		_, _ = io.Copy(log, logR)
		close(logged)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	rd := &reader{r: bufio.NewReader(resR), jobs: jobs, limit: limit, job: -1}
	read := make(chan error, 1)
	go func() { read <- rd.read() }()

	var readErr, waitErr error
	timedOut := false
	select {
	case readErr = <-read:
		// Complete, or unreadable: nothing more is needed from Ruby. An
		// end of the results is mostly Ruby's own: its status tells why.
		if readErr != nil {
			select {
			case waitErr = <-exited:
				exited <- waitErr
			case <-time.After(drainWait):
			}
		}
		killGroup()
		waitErr = <-exited
	case waitErr = <-exited:
		killGroup()
		_ = resR.SetReadDeadline(time.Now().Add(drainWait))
		readErr = <-read
	case <-ctx.Done():
		timedOut = true
		killGroup()
		waitErr = <-exited
		_ = resR.SetReadDeadline(time.Now())
		readErr = <-read
	}
	_ = logR.SetReadDeadline(time.Now().Add(drainWait))
	<-logged
	if readErr == nil {
		return rd.out, nil
	}
	f := &failure{job: rd.job, template: rd.template, log: log.String()}
	var pe protocolError
	switch {
	case timedOut && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("rendering stopped: %w", ctx.Err())
	case timedOut:
		f.timeout, f.message = true, "rendering did not finish in time"
	case errors.As(readErr, &pe):
		f.message = string(pe)
	case waitErr != nil:
		f.message = "Ruby ended while rendering it: " + waitErr.Error()
	default:
		f.message = "Ruby ended while rendering it: exit status 0"
	}
	return nil, f
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// protocolError is a frame that breaks the protocol or a bound.
type protocolError string

func (e protocolError) Error() string { return string(e) }

// reader reads the results of jobs, and knows which template was started
// last.
type reader struct {
	r     *bufio.Reader
	jobs  []Job
	limit int
	// total is the output held so far, bounded by maxBatchOutput.
	total int
	out   [][]Output
	// job and template are the template started last; pending says its
	// result is still to come.
	job, template int
	pending       bool
}

func (rd *reader) read() error {
	rd.out = make([][]Output, len(rd.jobs))
	for i, j := range rd.jobs {
		rd.out[i] = make([]Output, len(j.Templates))
	}
	var header [9]byte
	for {
		if _, err := io.ReadFull(rd.r, header[:]); err != nil {
			return err
		}
		tag, n := header[0], binary.BigEndian.Uint64(header[1:])
		switch {
		case tag == frameStart && n == 0 && !rd.pending && rd.more():
			rd.job, rd.template = rd.next()
			rd.pending = true
		case (tag == frameContent || tag == frameError) && rd.pending:
			if n > uint64(rd.limit) {
				return protocolError(fmt.Sprintf("its rendered output exceeds %s, the limit per template", size(rd.limit)))
			}
			if rd.total += int(n); rd.total > maxBatchOutput {
				return protocolError(fmt.Sprintf("the rendered output of the batch exceeds %s, the limit of all templates together", size(maxBatchOutput)))
			}
			data := make([]byte, n)
			if _, err := io.ReadFull(rd.r, data); err != nil {
				return err
			}
			if tag == frameContent {
				rd.out[rd.job][rd.template].Content = data
			} else {
				rd.out[rd.job][rd.template].Error = string(data)
			}
			rd.pending = false
		case tag == frameDone && n == 0 && !rd.pending && !rd.more():
			return nil
		default:
			return protocolError("Ruby's results became unreadable while rendering it (did the template write to descriptor 3?)")
		}
	}
}

// next is the template after the one started last (job len(jobs) after
// the last).
func (rd *reader) next() (int, int) {
	j, t := rd.job, rd.template+1
	if j < 0 {
		j, t = 0, 0
	}
	for j < len(rd.jobs) && t >= len(rd.jobs[j].Templates) {
		j, t = j+1, 0
	}
	return j, t
}

func (rd *reader) more() bool {
	j, _ := rd.next()
	return j < len(rd.jobs)
}

// size formats a byte count as context.rb does.
func size(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// tail keeps the last logTail bytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > logTail {
		t.b = append(t.b[:0], t.b[len(t.b)-logTail:]...)
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.b) }

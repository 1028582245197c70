package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// tailLines is how many of a failed pre-start's last output lines its
// error carries (the kubelet keeps 4 KB of a termination message).
const tailLines = 10

// PreStart runs bin/pre-start of every job in jobs at once and waits for
// all of them, as the agent's run_script does before monit starts
// anything: a job without the script is skipped, each runs as root with its
// job's environment (BPM's defaults for the job), its output appended to
// the job's pre-start log files and echoed, line by line and prefixed with
// the job, to the container's output. The error, in the agent's words,
// names the failed and the successful jobs, with each failed job's last
// output lines.
func (s Scripts) PreStart(ctx context.Context, jobs []string) error {
	var mu sync.Mutex // one line at a time on the container's output
	type result struct {
		job, tail string
		err       error
	}
	results := make([]result, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		if _, err := os.Stat(s.path(job, contract.PreStart)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		wg.Go(func() {
			js := s
			out, errOut := &prefixed{mu: &mu, w: s.Out, prefix: job + ": "}, &prefixed{mu: &mu, w: s.Err, prefix: job + ": "}
			js.Out, js.Err = out, errOut
			env := bpm.DefaultEnv(job)
			var list []string
			for _, k := range slices.Sorted(maps.Keys(env)) {
				list = append(list, k+"="+env[k])
			}
			_, tail, err := js.run(ctx, job, contract.PreStart, list)
			out.flush()
			errOut.flush()
			results[i] = result{job: job, tail: lastLines(tail, tailLines), err: err}
		})
	}
	wg.Wait()
	var failed, passed []string
	var details strings.Builder
	for _, r := range results {
		switch {
		case r.job == "":
		case r.err != nil:
			failed = append(failed, r.job)
			fmt.Fprintf(&details, "\n%s", r.err)
			if r.tail != "" {
				fmt.Fprintf(&details, "; its last output:\n%s", r.tail)
			}
		default:
			passed = append(passed, r.job)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	msg := "Failed Jobs: " + strings.Join(failed, ", ")
	if len(passed) > 0 {
		msg += ". Successful Jobs: " + strings.Join(passed, ", ")
	}
	return fmt.Errorf("%d of %d %s scripts failed. %s.%s", len(failed), len(failed)+len(passed), contract.PreStart, msg, details.String())
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// prefixed writes whole lines to w, each after prefix, one writer at a
// time: scripts running at once do not mix their lines.
type prefixed struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	if i := bytes.LastIndexByte(p.buf, '\n'); i >= 0 {
		p.write(p.buf[:i+1])
		p.buf = slices.Delete(p.buf, 0, i+1)
	}
	return len(b), nil
}

// flush writes what is left of an unfinished last line.
func (p *prefixed) flush() {
	if len(p.buf) > 0 {
		p.write(append(p.buf, '\n'))
		p.buf = nil
	}
}

func (p *prefixed) write(lines []byte) {
	var out bytes.Buffer
	for line := range bytes.Lines(lines) {
		out.WriteString(p.prefix)
		out.Write(line)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.w.Write(out.Bytes())
}

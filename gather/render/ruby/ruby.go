// Package ruby renders BOSH job templates (ERB) with real Ruby: one `ruby`
// process renders a whole batch (every template of an instance group, or
// every bpm.yml.erb of a deployment) from one Marshal document on stdin (see
// marshal.go), with the evaluation context of context.rb, embedded here;
// results come back framed on a descriptor of their own (see process.go).
package ruby

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

//go:embed context.rb
var contextScript string

// Template is one ERB template, named by its key in the job spec's
// `templates` (or "monit").
type Template struct {
	Name   string
	Source string
}

// Job is a set of templates rendered against one template spec (the
// director's template spec Hash, a *yamlvalue.Map: its key order is the
// Hash's, each value arrives as the Ruby class the model stands for).
// Group and Name name the job in errors of the render as a whole (a
// deadline, Ruby ending); they are not part of what is rendered.
type Job struct {
	Group, Name string
	Spec        any
	Templates   []Template
}

// Output is a rendered template, or the director-format error line
// ("Error filling in template '<src>' (line N: msg)") when it failed.
type Output struct {
	Content []byte
	Error   string
}

// ErrNoRuby is returned when no ruby is on PATH.
var ErrNoRuby = errors.New("ruby not found on PATH: bosh-injector renders ERB templates with Ruby (the Debian package `ruby`)")

// Bounds of a render the commands default to.
const (
	DefaultTimeout = 5 * time.Minute
	// DefaultMaxOutput is far above any release's rendered file (a few
	// hundred KiB at most): it only stops a runaway template.
	DefaultMaxOutput = 64 << 20
)

// Renderer renders batches of templates, each in one Ruby process.
type Renderer struct {
	// Timeout bounds the render of a batch (0: no bound): Ruby and every
	// process it started are killed then, and the error names the template
	// being rendered.
	Timeout time.Duration
	// MaxOutput bounds each template's rendered output in bytes (0:
	// DefaultMaxOutput).
	MaxOutput int
	// Confinement, when set, confines the Ruby process (see Confinement).
	Confinement *Confinement
}

// Render renders jobs with a Renderer of default bounds and no deadline.
func Render(ctx context.Context, jobs []Job) ([][]Output, error) {
	return Renderer{}.Render(ctx, jobs)
}

// Render renders every template of every job in one Ruby process and returns
// the outputs in the same order. A template's failure is in its Output; the
// error is for the render as a whole (Ruby ending or killed at the deadline
// while rendering a template), in the director's format naming the group,
// job and template.
func (r Renderer) Render(ctx context.Context, jobs []Job) ([][]Output, error) {
	bin, err := exec.LookPath("ruby")
	if err != nil {
		return nil, ErrNoRuby
	}
	input, err := marshalBatch(jobs)
	if err != nil {
		return nil, fmt.Errorf("encoding the templates for Ruby: %w", err)
	}
	limit := r.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	out, err := run(ctx, r.Confinement, bin, input, jobs, limit)
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			if f.timeout && r.Timeout > 0 {
				f.message = fmt.Sprintf("rendering did not finish within the render timeout of %s", r.Timeout)
			}
			return nil, f.named(jobs)
		}
		return nil, err
	}
	return out, nil
}

// Digest identifies what Render renders for jobs: the batch, the renderer
// (context.rb) and salt (whatever else the caller's use of the outputs
// depends on). Equal digests render equal outputs, unless a template reads
// more than its spec: the clock, the environment, random numbers.
func Digest(jobs []Job, salt string) (string, error) {
	input, err := marshalBatch(jobs)
	if err != nil {
		return "", fmt.Errorf("encoding the templates for Ruby: %w", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(salt), []byte(contextScript), input} {
		// Lengths first, so no two different triples hash the same bytes.
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil)), nil
}

// JobErrors are the failed templates of one job.
type JobErrors struct {
	Job string
	// Monit holds the error of the job's monit file; the director reports
	// it without the per-job header.
	Monit     string
	Templates []string
}

// GroupError formats a group's template errors in the director's nested
// list, or returns "" when there are none.
func GroupError(group string, jobs []JobErrors) string {
	var b strings.Builder
	for _, j := range jobs {
		if j.Monit != "" {
			fmt.Fprintf(&b, "  - %s\n", j.Monit)
		}
		if len(j.Templates) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  - Unable to render templates for job '%s'. Errors are:\n", j.Job)
		for _, e := range j.Templates {
			fmt.Fprintf(&b, "    - %s\n", e)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return fmt.Sprintf("- Unable to render jobs for instance group '%s'. Errors are:\n%s", group, strings.TrimRight(b.String(), "\n"))
}

// File is a rendered file of a job, by its path under the job's directory.
type File struct {
	Path    string
	Content []byte
}

// WriteJob writes a rendered job under dir (its /var/vcap/jobs/<job>) with
// the modes the BOSH agent sets (FixPermissions): templates hold properties
// and credentials, so 0750 for directories and everything under bin/, 0640
// otherwise; content verbatim. A bin/ file without a shebang is written too:
// releases keep data files there. Every write goes through an os.Root on
// dir, so no destination (a release's choice) leaves the job's directory.
func WriteJob(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o750); err != nil && !madeForMount(dir, err) {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range files {
		clean := path.Clean(f.Path)
		if clean == "." || strings.HasPrefix(clean, "../") || path.IsAbs(clean) || strings.ContainsRune(clean, 0) {
			return fmt.Errorf("template destination %q escapes the job directory", f.Path)
		}
		name := filepath.FromSlash(clean)
		if err := root.MkdirAll(filepath.Dir(name), 0o750); err != nil {
			return err
		}
		mode := os.FileMode(0o640)
		if strings.HasPrefix(clean, "bin/") {
			mode = 0o750
		}
		if err := root.WriteFile(name, f.Content, mode); err != nil {
			return err
		}
		// WriteFile keeps an existing file's mode and the umask applies to
		// new ones: set it explicitly.
		if err := root.Chmod(name, mode); err != nil {
			return err
		}
	}
	return nil
}

// madeForMount says whether dir, which render may not chmod (err), is one
// the kubelet made for a container's subPath mount before render wrote it:
// owned by root, with the volume's mode, open to all. It keeps that mode;
// the files render writes in it get theirs.
func madeForMount(dir string, err error) bool {
	info, statErr := os.Stat(dir)
	if !errors.Is(err, fs.ErrPermission) || statErr != nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0 && info.Mode().Perm()&0o002 != 0
}

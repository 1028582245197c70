// Package ruby renders BOSH job templates (ERB) with real Ruby: one `ruby`
// process renders a whole batch (every template of an instance group, or
// every bpm.yml.erb of a deployment) from one Marshal document on stdin (see
// marshal.go), with the evaluation context of context.rb, embedded here.
package ruby

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
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
type Job struct {
	Spec      any
	Templates []Template
}

// Output is a rendered template, or the director-format error line
// ("Error filling in template '<src>' (line N: msg)") when it failed.
type Output struct {
	Content []byte `json:"content"`
	Error   string `json:"error"`
}

// ErrNoRuby is returned when no ruby is on PATH.
var ErrNoRuby = errors.New("ruby not found on PATH: bosh-injector renders ERB templates with Ruby (the Debian package `ruby`)")

// Render renders every template of every job in one Ruby process and returns
// the outputs in the same order. The error is for the process itself; a
// template's failure is in its Output.
func Render(ctx context.Context, jobs []Job) ([][]Output, error) {
	bin, err := exec.LookPath("ruby")
	if err != nil {
		return nil, ErrNoRuby
	}
	input, err := marshalBatch(jobs)
	if err != nil {
		return nil, fmt.Errorf("encoding the templates for Ruby: %w", err)
	}
	var stdout, stderr bytes.Buffer
	// UTF-8 whatever the locale (containers often have none); gems are not
	// needed, and skipping them halves Ruby's start-up.
	cmd := exec.CommandContext(ctx, bin, "--disable-gems", "-E", "UTF-8:UTF-8", "-e", contextScript)
	cmd.Stdin = bytes.NewReader(input)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return nil, fmt.Errorf("ruby: %w: %s", err, lastLines(stderr.String(), 20))
	}
	var out struct {
		Results [][]Output `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("reading Ruby's results: %w", err)
	}
	if len(out.Results) != len(jobs) {
		return nil, fmt.Errorf("ruby returned %d results for %d jobs", len(out.Results), len(jobs))
	}
	return out.Results, nil
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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
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
	if err := os.Chmod(dir, 0o750); err != nil {
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

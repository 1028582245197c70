// Package rendering is `bosh-injector render`, the render init container of
// an injected pod: from the mounted ig-resolved Secret and the job templates
// copied out of the release images, it renders every template of every job
// of the instance group for this pod's instance, in one Ruby process, into
// /var/vcap/jobs. It needs no API access.
package rendering

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/model/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// AddressResolved is what render logs once the instance's address resolves
// to the pod's IP.
const AddressResolved = "the instance's address resolves to the pod's IP"

// Config says what to render where.
type Config struct {
	// ResolvedFile is the mounted ig-resolved Secret's data file.
	ResolvedFile string
	// JobsSrc holds the copied jobs: <JobsSrc>/<release>/<job>/job.MF.
	JobsSrc string
	// VCAP is /var/vcap (any root in tests): jobs, data and sys go below.
	VCAP      string
	Namespace string
	Index     int
	PodIP     string
	// ResolvedDigest, when set, must be the digest of the Secret data
	// {resolved.Key: the file's content}.
	ResolvedDigest string
	// AddressWait, when set with PodIP, is how long Run waits after
	// rendering for the instance's address to resolve to PodIP
	// (AwaitAddress), with Lookup (nil: the system resolver).
	AddressWait time.Duration
	Lookup      Lookup
	// Log receives how the address wait went.
	Log logr.Logger
	// Rendered, when set, runs once the jobs are written, before the
	// address wait, with the instance's address: a render container beside
	// the processes ends its step at once (pre-start need not wait for
	// DNS) and hands the wait for the address to the launchers.
	Rendered func(address string) error
}

// ConfigFromEnv fills the instance part of c from the environment the
// webhook sets.
func ConfigFromEnv(c Config) (Config, error) {
	index, err := strconv.Atoi(os.Getenv(contract.EnvIndex))
	if err != nil {
		return c, fmt.Errorf("%s must be the instance index, got %q", contract.EnvIndex, os.Getenv(contract.EnvIndex))
	}
	c.Index, c.PodIP, c.Namespace = index, os.Getenv(contract.EnvPodIP), os.Getenv(contract.EnvNamespace)
	c.ResolvedDigest = os.Getenv(contract.EnvResolvedDigest)
	if c.Namespace == "" {
		return c, fmt.Errorf("%s is not set", contract.EnvNamespace)
	}
	return c, nil
}

// Run renders the instance's jobs. Its error is the director-format list of
// every template that failed.
func Run(ctx context.Context, c Config) error {
	data, err := os.ReadFile(c.ResolvedFile)
	if err != nil {
		return fmt.Errorf("reading the resolved properties: %w", err)
	}
	if c.ResolvedDigest != "" && secretdata.Digest(map[string][]byte{resolved.Key: data}) != c.ResolvedDigest {
		return fmt.Errorf("the resolved properties mounted from %s are not the version the webhook accepted for this pod (the Secret was replaced after admission): delete the pod to be admitted again", c.ResolvedFile)
	}
	var g resolved.Group
	if err := secretdata.Decode(data, &g); err != nil {
		return fmt.Errorf("reading the resolved properties %s: %w", c.ResolvedFile, err)
	}
	inst, specs, err := g.Instance(c.Namespace, c.Index, c.PodIP)
	if err != nil {
		return err
	}

	prepared := make([]Prepared, len(g.Jobs))
	batch := make([]ruby.Job, len(g.Jobs))
	for ji, j := range g.Jobs {
		spec, err := jobspec.LoadImageLayout(filepath.Join(c.JobsSrc, j.Release), j.Name)
		if err != nil {
			return fmt.Errorf("job '%s' of release '%s': %w", j.Name, j.Release, err)
		}
		prepared[ji] = Prepare(g.InstanceGroup, j.Name, spec, specs[ji])
		batch[ji] = prepared[ji].Job
	}
	outputs, err := ruby.Render(ctx, batch)
	if err != nil {
		return err
	}
	var errs []ruby.JobErrors
	files := make([][]ruby.File, len(g.Jobs))
	for ji := range g.Jobs {
		var je ruby.JobErrors
		files[ji], je = prepared[ji].Collect(outputs[ji])
		errs = append(errs, je)
	}
	if e := ruby.GroupError(g.InstanceGroup, errs); e != "" {
		return fmt.Errorf("%s", e)
	}
	for ji, j := range g.Jobs {
		if err := ruby.WriteJob(filepath.Join(c.VCAP, "jobs", j.Name), files[ji]); err != nil {
			return fmt.Errorf("writing job '%s': %w", j.Name, err)
		}
		for _, dir := range standardDirs(c.VCAP, j.Name) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
	}
	if c.Rendered != nil {
		if err := c.Rendered(inst.Address); err != nil {
			return err
		}
	}
	if c.AddressWait > 0 && c.PodIP != "" {
		waited, err := AwaitAddress(ctx, c.Lookup, inst.Address, c.PodIP, c.AddressWait)
		if ctx.Err() != nil {
			// Stopped, not timed out: the pod is going away.
			return ctx.Err()
		}
		if err != nil {
			c.Log.Info("starting the jobs before their address resolves", "error", err.Error())
		} else {
			c.Log.Info(AddressResolved, "address", inst.Address, "ip", c.PodIP, "waited", waited.Round(time.Millisecond).String())
		}
	}
	return nil
}

// Prepared is a job's templates ready to render in a batch: its monit
// file(s) first, as the director renders them, then every template.
type Prepared struct {
	Name   string
	Job    ruby.Job
	dests  []string
	monits int
}

// Prepare lays out job name's templates (of instance group group) for
// rendering against templateSpec.
func Prepare(group, name string, spec *jobspec.Spec, templateSpec any) Prepared {
	p := Prepared{Name: name, Job: ruby.Job{Group: group, Name: name, Spec: templateSpec}}
	for _, m := range spec.MonitNames() {
		p.Job.Templates = append(p.Job.Templates, ruby.Template{Name: m, Source: spec.Monit[m]})
		p.dests = append(p.dests, m)
	}
	p.monits = len(p.dests)
	for _, t := range spec.Templates {
		p.Job.Templates = append(p.Job.Templates, ruby.Template{Name: t.Source, Source: t.Content})
		p.dests = append(p.dests, t.Destination)
	}
	return p
}

// Collect sorts a job's outputs into files to write and errors to report.
func (p Prepared) Collect(outputs []ruby.Output) ([]ruby.File, ruby.JobErrors) {
	var files []ruby.File
	je := ruby.JobErrors{Job: p.Name}
	for i, out := range outputs {
		switch {
		case out.Error != "" && i < p.monits:
			je.Monit = out.Error
		case out.Error != "":
			je.Templates = append(je.Templates, out.Error)
		default:
			files = append(files, ruby.File{Path: p.dests[i], Content: out.Content})
		}
	}
	return files, je
}

// standardDirs are the directories BOSH gives every job.
func standardDirs(vcap, job string) []string {
	return []string{
		filepath.Join(vcap, "data", job, "tmp"),
		filepath.Join(vcap, "sys", "log", job),
		filepath.Join(vcap, "sys", "run", job),
	}
}

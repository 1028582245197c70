package rendering

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/deployment"
	"github.com/bosh-injector/bosh-injector/gather/resolved"
	"github.com/bosh-injector/bosh-injector/gather/ruby"
)

// InstanceJobs are the rendered jobs of one instance.
type InstanceJobs struct {
	Group string
	Index int
	Jobs  []RenderedJob
}

// RenderedJob is a job's rendered files.
type RenderedJob struct {
	Name  string
	Files []ruby.File
}

// Deployment renders every job of every instance of d selected by keep (nil
// keeps all) in one Ruby process, as the director would, with ip as the
// instances' IP. Errors are the director's per-group lists, each failure
// reported once however many instances share it.
func Deployment(ctx context.Context, d *deployment.Deployment, ip string, keep func(group string, index int) bool) ([]InstanceJobs, error) {
	var out []InstanceJobs
	var prepared []Prepared
	var batch []ruby.Job
	for _, g := range d.Groups {
		for _, inst := range g.Instances {
			if keep != nil && !keep(g.Manifest.Name, inst.Index) {
				continue
			}
			out = append(out, InstanceJobs{Group: g.Manifest.Name, Index: inst.Index})
			for ji, j := range g.Jobs {
				p := Prepare(j.Name, j.Spec, resolved.WithIP(inst.Specs[ji], ip))
				prepared = append(prepared, p)
				batch = append(batch, p.Job)
			}
		}
	}
	// An empty selection renders nothing and starts no Ruby process.
	if len(batch) == 0 {
		return out, nil
	}
	outputs, err := ruby.Render(ctx, batch)
	if err != nil {
		return nil, err
	}
	var errs []string
	k := 0
	for i := range out {
		g := groupOf(d, out[i].Group)
		var jobErrs []ruby.JobErrors
		for range g.Jobs {
			files, je := prepared[k].Collect(outputs[k])
			out[i].Jobs = append(out[i].Jobs, RenderedJob{Name: prepared[k].Name, Files: files})
			jobErrs = append(jobErrs, je)
			k++
		}
		if e := ruby.GroupError(out[i].Group, jobErrs); e != "" && !slices.Contains(errs, e) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

func groupOf(d *deployment.Deployment, name string) *deployment.Group {
	for i := range d.Groups {
		if d.Groups[i].Manifest.Name == name {
			return &d.Groups[i]
		}
	}
	return nil
}

package rendering

import (
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

// InstanceJobs are the rendered jobs of one instance.
type InstanceJobs struct {
	Group string
	Index int
	Jobs  []RenderedJob
	// Errors are the failed templates of each job, in Jobs' order.
	Errors []ruby.JobErrors
}

// RenderedJob is a job's rendered files.
type RenderedJob struct {
	Name  string
	Files []ruby.File
	// Monit are its monit files as rendered ("monit" first), those that
	// rendered: what BOSH starts is what they check.
	Monit [][]byte
}

// Batch is every job of every selected instance of a deployment, laid out
// for one Ruby process; callers may render it together with other jobs.
type Batch struct {
	Jobs      []ruby.Job
	instances []InstanceJobs
	prepared  []Prepared
	groupJobs []int
}

// PrepareDeployment lays out every job of every instance of d selected by
// keep (nil keeps all) with ip as the instances' IP, as the director renders
// them before it touches any instance.
func PrepareDeployment(d *deployment.Deployment, ip string, keep func(group string, index int) bool) *Batch {
	b := &Batch{}
	for _, g := range d.Groups {
		for _, inst := range g.Instances {
			if keep != nil && !keep(g.Manifest.Name, inst.Index) {
				continue
			}
			b.instances = append(b.instances, InstanceJobs{Group: g.Manifest.Name, Index: inst.Index})
			b.groupJobs = append(b.groupJobs, len(g.Jobs))
			for ji, j := range g.Jobs {
				p := Prepare(g.Manifest.Name, j.Name, j.Spec, resolved.WithIP(inst.Specs[ji], ip))
				b.prepared = append(b.prepared, p)
				b.Jobs = append(b.Jobs, p.Job)
			}
		}
	}
	return b
}

// Collect sorts the batch's outputs (one per job of b.Jobs, in order) into
// each instance's files and template errors.
func (b *Batch) Collect(outputs [][]ruby.Output) []InstanceJobs {
	out := make([]InstanceJobs, len(b.instances))
	k := 0
	for i, inst := range b.instances {
		out[i] = inst
		for range b.groupJobs[i] {
			p := b.prepared[k]
			files, je := p.Collect(outputs[k])
			job := RenderedJob{Name: p.Name, Files: files}
			for _, m := range outputs[k][:p.monits] {
				if m.Error == "" {
					job.Monit = append(job.Monit, m.Content)
				}
			}
			out[i].Jobs = append(out[i].Jobs, job)
			out[i].Errors = append(out[i].Errors, je)
			k++
		}
	}
	return out
}

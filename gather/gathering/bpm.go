package gathering

import (
	"context"
	"fmt"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/deployment"
	"github.com/bosh-injector/bosh-injector/gather/ruby"
)

// BPMDestination is where a job's BPM configuration is rendered to.
const BPMDestination = "config/bpm.yml"

// NewRenderBPM renders bpm.yml of every instance of every group in one Ruby
// process (per instance, so spec.index and spec.bootstrap work in it), then
// parses and validates each, and groups a group's instances by identical
// result. Errors are aggregated per group and job in the director's format.
func NewRenderBPM(ctx context.Context) RenderBPM {
	return func(d *deployment.Deployment) ([][]bpm.InstanceBPM, error) {
		type slot struct{ group, inst, job int }
		var jobs []ruby.Job
		var slots []slot
		for gi, g := range d.Groups {
			for ii, inst := range g.Instances {
				for ji, j := range g.Jobs {
					for _, t := range j.Spec.Templates {
						if t.Destination == BPMDestination {
							jobs = append(jobs, ruby.Job{Spec: inst.Specs[ji], Templates: []ruby.Template{{Name: t.Source, Source: t.Content}}})
							slots = append(slots, slot{gi, ii, ji})
						}
					}
				}
			}
		}
		// A deployment without bpm.yml templates needs no Ruby process.
		var outputs [][]ruby.Output
		if len(jobs) > 0 {
			var err error
			if outputs, err = ruby.Render(ctx, jobs); err != nil {
				return nil, err
			}
		}
		configs := make([][]map[string]bpm.Config, len(d.Groups))
		errs := make([][]ruby.JobErrors, len(d.Groups))
		for gi, g := range d.Groups {
			configs[gi] = make([]map[string]bpm.Config, len(g.Instances))
			for ii := range configs[gi] {
				configs[gi][ii] = map[string]bpm.Config{}
			}
			errs[gi] = make([]ruby.JobErrors, len(g.Jobs))
			for ji, j := range g.Jobs {
				errs[gi][ji].Job = j.Name
			}
		}
		for k, s := range slots {
			g := &d.Groups[s.group]
			job := g.Jobs[s.job].Name
			out := outputs[k][0]
			message := out.Error
			if message == "" {
				c, err := bpm.Parse(out.Content, job)
				if err == nil {
					configs[s.group][s.inst][job] = c
					continue
				}
				message = err.Error()
			}
			// The same failure on every instance is reported once.
			line := fmt.Sprintf("%s (instance %s/%d)", message, g.Manifest.Name, g.Instances[s.inst].Index)
			je := &errs[s.group][s.job]
			if len(je.Templates) == 0 || !strings.HasPrefix(je.Templates[len(je.Templates)-1], message+" (") {
				je.Templates = append(je.Templates, line)
			}
		}
		var groupErrs []string
		result := make([][]bpm.InstanceBPM, len(d.Groups))
		for gi, g := range d.Groups {
			if e := ruby.GroupError(g.Manifest.Name, errs[gi]); e != "" {
				groupErrs = append(groupErrs, e)
				continue
			}
			indexes := make([]int, len(g.Instances))
			for ii, inst := range g.Instances {
				indexes[ii] = inst.Index
			}
			result[gi] = bpm.Group(indexes, configs[gi])
		}
		if len(groupErrs) > 0 {
			return nil, fmt.Errorf("%s", strings.Join(groupErrs, "\n"))
		}
		return result, nil
	}
}

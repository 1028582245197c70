package gathering

import (
	"context"
	"fmt"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/ruby"
	"github.com/bosh-injector/bosh-injector/gather/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/versions"
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
		for gi := range d.Groups {
			gjobs, gslots := bpmBatch(&d.Groups[gi])
			jobs = append(jobs, gjobs...)
			for _, s := range gslots {
				slots = append(slots, slot{gi, s[0], s[1]})
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

// bpmBatch is what renders group g's bpm.yml: one Ruby job per instance and
// job with a bpm.yml template, and which instance and job (indexes in g)
// each is.
func bpmBatch(g *deployment.Group) ([]ruby.Job, [][2]int) {
	var jobs []ruby.Job
	var slots [][2]int
	for ii, inst := range g.Instances {
		for ji, j := range g.Jobs {
			for _, t := range j.Spec.Templates {
				if t.Destination == BPMDestination {
					jobs = append(jobs, ruby.Job{Spec: inst.Specs[ji], Templates: []ruby.Template{{Name: t.Source, Source: t.Content}}})
					slots = append(slots, [2]int{ii, ji})
				}
			}
		}
	}
	return jobs, slots
}

// groupBPM is a group's instances grouped by BPM configuration, and what
// they were rendered from (ruby.Digest of the group's bpmBatch).
type groupBPM struct {
	instances []bpm.InstanceBPM
	rendered  string
	// reused is true when the instances are the latest stored version's.
	reused bool
}

// bpmOf returns the BPM of every group of d. A group whose bpm.yml
// templates and specs are those its latest stored BPM info was rendered
// from keeps that info's BPM; only the others are rendered, in one batch:
// Ruby is most of re-gathering an unchanged deployment.
func (cfg *Config) bpmOf(d *deployment.Deployment, stored versions.Stored, render RenderBPM) ([]groupBPM, error) {
	out := make([]groupBPM, len(d.Groups))
	changed := *d
	changed.Groups = nil
	var at []int
	for gi := range d.Groups {
		g := &d.Groups[gi]
		jobs, _ := bpmBatch(g)
		digest, err := ruby.Digest(jobs, cfg.Build)
		if err != nil {
			return nil, err
		}
		out[gi].rendered = digest
		key := versions.Key{Namespace: cfg.Namespace, Deployment: d.Name, Kind: names.KindBPM, InstanceGroup: g.Manifest.Name}
		if latest := versions.Latest(stored.Of(key)); latest != nil {
			// An undecodable version is rendered over, as if absent.
			var info bpm.Info
			if secretdata.Decode(latest.Secret.Data[bpm.InfoKey], &info) == nil && info.Rendered == digest {
				out[gi].instances, out[gi].reused = info.BPM, true
				continue
			}
		}
		changed.Groups = append(changed.Groups, *g)
		at = append(at, gi)
	}
	if len(at) == 0 {
		return out, nil
	}
	bpms, err := render(&changed)
	if err != nil {
		return nil, err
	}
	for k, gi := range at {
		out[gi].instances = bpms[k]
	}
	return out, nil
}

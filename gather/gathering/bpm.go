package gathering

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/render/rendering"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/inject/runtime/monit"
)

// BPMDestination is where a job's BPM configuration is rendered to.
const BPMDestination = "config/bpm.yml"

// GatherIP is spec.ip while gathering checks the templates: pods' IPs are
// not known yet, and the director too renders 127.0.0.1 for an IP it does
// not know yet (dynamic networks).
const GatherIP = "127.0.0.1"

// Rendered is a whole deployment rendered.
type Rendered struct {
	// BPM is, per group (in the deployment's order), the instances grouped
	// by identical BPM configuration.
	BPM [][]bpm.InstanceBPM
	// Instances are the rendered jobs of the selected instances.
	Instances []rendering.InstanceJobs
}

// NewRenderBPM renders every template of every job of every instance, as
// the director does before it touches any instance, so that a broken
// template fails the gathering instead of the pods one by one; it returns
// the BPM configurations and drops the rendered files.
func NewRenderBPM(ctx context.Context, r ruby.Renderer) RenderBPM {
	return func(d *deployment.Deployment) ([][]bpm.InstanceBPM, error) {
		rendered, err := RenderDeployment(ctx, r, d, GatherIP, nil)
		if err != nil {
			return nil, err
		}
		return rendered.BPM, nil
	}
}

// RenderDeployment renders, with r in one Ruby process, every template of every
// job of the instances keep selects (nil keeps all) with ip as spec.ip, and
// every instance's bpm.yml as the webhook reads it (without spec.ip, per
// instance so spec.index and spec.bootstrap work in it), which it parses and
// validates. The error lists every failed template of every group in the
// director's format, each failure once however many instances share it.
func RenderDeployment(ctx context.Context, r ruby.Renderer, d *deployment.Deployment, ip string, keep func(group string, index int) bool) (*Rendered, error) {
	all := rendering.PrepareDeployment(d, ip, keep)
	type slot struct {
		group, inst, job int
		template         string
	}
	var bpmJobs, monitJobs []ruby.Job
	var slots, monitSlots []slot
	for gi, g := range d.Groups {
		for ii, inst := range g.Instances {
			for ji, j := range g.Jobs {
				for _, t := range j.Spec.Templates {
					if t.Destination == BPMDestination {
						bpmJobs = append(bpmJobs, ruby.Job{Group: g.Manifest.Name, Name: j.Name, Spec: inst.Specs[ji], Templates: []ruby.Template{{Name: t.Source, Source: t.Content}}})
						slots = append(slots, slot{gi, ii, ji, t.Source})
					}
				}
				// Its monit files too: BOSH starts what they check, which
				// properties and spec may change (`if p("enabled")`).
				// The full render has a kept instance's already.
				if keep == nil || keep(g.Manifest.Name, inst.Index) {
					continue
				}
				monits := ruby.Job{Group: g.Manifest.Name, Name: j.Name, Spec: inst.Specs[ji]}
				for _, m := range j.Spec.MonitNames() {
					monits.Templates = append(monits.Templates, ruby.Template{Name: m, Source: j.Spec.Monit[m]})
				}
				monitJobs = append(monitJobs, monits)
				monitSlots = append(monitSlots, slot{group: gi, inst: ii, job: ji})
			}
		}
	}
	// A deployment without templates needs no Ruby process.
	outputs := make([][]ruby.Output, len(all.Jobs)+len(bpmJobs)+len(monitJobs))
	if batch := slices.Concat(all.Jobs, bpmJobs, monitJobs); slices.ContainsFunc(batch, func(j ruby.Job) bool { return len(j.Templates) > 0 }) {
		var err error
		if outputs, err = r.Render(ctx, batch); err != nil {
			return nil, err
		}
	}
	instances := all.Collect(outputs[:len(all.Jobs)])
	bpmOut := outputs[len(all.Jobs) : len(all.Jobs)+len(bpmJobs)]
	monitOut := outputs[len(all.Jobs)+len(bpmJobs):]

	// Errors of the full render, per group and instance, by job.
	errs := make([]map[int][]ruby.JobErrors, len(d.Groups))
	byGroup := map[string]int{}
	for gi, g := range d.Groups {
		byGroup[g.Manifest.Name] = gi
		errs[gi] = map[int][]ruby.JobErrors{}
	}
	for _, inst := range instances {
		errs[byGroup[inst.Group]][inst.Index] = inst.Errors
	}
	configs := make([][]map[string]bpm.Config, len(d.Groups))
	for gi, g := range d.Groups {
		configs[gi] = make([]map[string]bpm.Config, len(g.Instances))
		for ii := range configs[gi] {
			configs[gi][ii] = map[string]bpm.Config{}
		}
	}
	// jobErrors are the errors of instance s's jobs, the full render's
	// when it rendered the instance: a template failing there already is
	// reported there.
	jobErrors := func(s slot) []ruby.JobErrors {
		g := &d.Groups[s.group]
		index := g.Instances[s.inst].Index
		jes, ok := errs[s.group][index]
		if !ok {
			jes = make([]ruby.JobErrors, len(g.Jobs))
			for ji, j := range g.Jobs {
				jes[ji].Job = j.Name
			}
			errs[s.group][index] = jes
		}
		return jes
	}
	for k, s := range slots {
		job := d.Groups[s.group].Jobs[s.job].Name
		out := bpmOut[k][0]
		message := out.Error
		if message == "" {
			c, err := bpm.Parse(out.Content, job)
			if err == nil {
				err = c.CheckPodVolumes(job)
			}
			if err == nil {
				configs[s.group][s.inst][job] = c
				continue
			}
			message = fmt.Sprintf("Invalid BPM configuration rendered from template '%s': %s", s.template, err)
		}
		if jes := jobErrors(s); !slices.Contains(jes[s.job].Templates, message) {
			jes[s.job].Templates = append(jes[s.job].Templates, message)
		}
	}
	// What each instance starts: its bpm.yml's processes, or its monit
	// file's for a job without one, unless its monit files check nothing.
	each := make([][]bpm.InstanceBPM, len(d.Groups))
	for gi := range d.Groups {
		each[gi] = make([]bpm.InstanceBPM, len(configs[gi]))
		for ii := range each[gi] {
			each[gi][ii].Jobs = configs[gi][ii]
		}
	}
	starts := func(s slot, checked []string) {
		job := d.Groups[s.group].Jobs[s.job].Name
		e := &each[s.group][s.inst]
		_, hasBPM := e.Jobs[job]
		switch {
		case len(checked) == 0:
			e.Idle = append(e.Idle, job)
		case !hasBPM:
			if e.Monit == nil {
				e.Monit = map[string][]string{}
			}
			e.Monit[job] = checked
		}
	}
	// The full render's instances (its monit errors are reported with its
	// templates'), then the others'.
	position := map[[2]int]int{}
	for gi, g := range d.Groups {
		for ii, inst := range g.Instances {
			position[[2]int{gi, inst.Index}] = ii
		}
	}
	for _, inst := range instances {
		gi := byGroup[inst.Group]
		for ji, j := range inst.Jobs {
			var checked []string
			for _, content := range j.Monit {
				checked = append(checked, monit.Processes(string(content))...)
			}
			starts(slot{group: gi, inst: position[[2]int{gi, inst.Index}], job: ji}, checked)
		}
	}
	for k, s := range monitSlots {
		var checked []string
		for _, out := range monitOut[k] {
			if out.Error != "" {
				if jes := jobErrors(s); jes[s.job].Monit == "" {
					jes[s.job].Monit = out.Error
				}
				continue
			}
			checked = append(checked, monit.Processes(string(out.Content))...)
		}
		starts(s, checked)
	}
	var groupErrs []string
	res := &Rendered{BPM: make([][]bpm.InstanceBPM, len(d.Groups)), Instances: instances}
	for gi, g := range d.Groups {
		failed := false
		for _, inst := range g.Instances {
			if e := ruby.GroupError(g.Manifest.Name, errs[gi][inst.Index]); e != "" {
				failed = true
				if !slices.Contains(groupErrs, e) {
					groupErrs = append(groupErrs, e)
				}
			}
		}
		if failed {
			continue
		}
		indexes := make([]int, len(g.Instances))
		for ii, inst := range g.Instances {
			indexes[ii] = inst.Index
		}
		res.BPM[gi] = bpm.Group(indexes, each[gi])
	}
	if len(groupErrs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(groupErrs, "\n"))
	}
	return res, nil
}

// renderInputs is what rendering group g depends on: one Ruby job per
// instance and job with all the job's templates and the instance's spec.
// RenderDeployment renders each from exactly these (spec.ip aside, a
// constant while gathering), so equal digests mean equal results.
func renderInputs(g *deployment.Group) []ruby.Job {
	var jobs []ruby.Job
	for _, inst := range g.Instances {
		for ji, j := range g.Jobs {
			templates := make([]ruby.Template, len(j.Spec.Templates))
			for ti, t := range j.Spec.Templates {
				templates[ti] = ruby.Template{Name: t.Source, Source: t.Content}
			}
			jobs = append(jobs, ruby.Job{Spec: inst.Specs[ji], Templates: templates})
		}
	}
	return jobs
}

// groupBPM is a group's instances grouped by BPM configuration, and what
// they were rendered from (ruby.Digest of the group's renderInputs).
type groupBPM struct {
	instances []bpm.InstanceBPM
	rendered  string
	// reused is true when the instances are the latest stored version's.
	reused bool
}

// bpmOf returns the BPM of every group of d. A group whose templates and
// specs are those its latest accepted BPM info (in stored) was rendered from (all of them
// rendered then, or there would be no such version) keeps that info's BPM;
// only the others are rendered, all of their templates in one batch: Ruby
// is most of re-gathering an unchanged deployment.
func (cfg *Config) bpmOf(d *deployment.Deployment, stored versions.Stored, render RenderBPM) ([]groupBPM, error) {
	out := make([]groupBPM, len(d.Groups))
	changed := *d
	changed.Groups = nil
	var at []int
	for gi := range d.Groups {
		g := &d.Groups[gi]
		digest, err := ruby.Digest(renderInputs(g), cfg.Build)
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

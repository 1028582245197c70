package ruby_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

// realisticTemplate is a config file of the size and shape real jobs have:
// properties, an optional block, a loop over link instances, JSON.
func realisticTemplate(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# generated config %d\n<%% require 'json' -%%>\n", i)
	b.WriteString("listen: 0.0.0.0:<%= p('port') %>\nuser: <%= p('db.user') %>\n")
	b.WriteString("<% if_p('db.pass') do |pw| -%>\npassword: <%= pw %>\n<% end.else do -%>\npassword: ~\n<% end -%>\n")
	b.WriteString("peers:\n<% link('db').instances.each do |i| -%>\n  - <%= i.address %>:<%= link('db').p('port') %> # <%= i.az %>\n<% end -%>\n")
	for k := range 20 {
		fmt.Fprintf(&b, "setting_%d: <%%= p('opts').fetch('zeta', 0) + %d %%>\n", k, k)
	}
	b.WriteString("extra: <%= JSON.generate(p('opts')) %>\n")
	return b.String()
}

// BenchmarkBatchVsPerTemplate renders 500 templates (50 jobs of 10) in one
// Ruby process, and the same templates with one process each, and reports
// both and the speed-up.
func BenchmarkBatchVsPerTemplate(b *testing.B) {
	var jobs []ruby.Job
	for j := range 50 {
		job := ruby.Job{Spec: spec(propsP(nil), dbLink)}
		for t := range 10 {
			job.Templates = append(job.Templates, ruby.Template{Name: fmt.Sprintf("t%d.erb", t), Source: realisticTemplate(j*10 + t)})
		}
		jobs = append(jobs, job)
	}
	ctx := context.Background()
	for b.Loop() {
		start := time.Now()
		out, err := ruby.Render(ctx, jobs)
		if err != nil || out[49][9].Error != "" {
			b.Fatal(err, out[49][9].Error)
		}
		batch := time.Since(start)

		start = time.Now()
		for _, j := range jobs {
			for _, t := range j.Templates {
				if _, err := ruby.Render(ctx, []ruby.Job{{Spec: j.Spec, Templates: []ruby.Template{t}}}); err != nil {
					b.Fatal(err)
				}
			}
		}
		perTemplate := time.Since(start)
		b.ReportMetric(float64(batch.Milliseconds()), "batch-ms")
		b.ReportMetric(float64(perTemplate.Milliseconds()), "per-template-ms")
		b.ReportMetric(float64(perTemplate)/float64(batch), "speedup")
	}
}

// linkWith is a consumed link "db" of n instances, as JSON.
func linkWith(n int) string {
	var b strings.Builder
	b.WriteString(`{"db":{"deployment_name":"dep","domain":"bosh","default_network":"default","instance_group":"pg","address":"dep-pg.ns.svc.cluster.local",` +
		`"properties":{"port":5432,"creds":{"user":"u"}},"instances":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"pg","id":"uuid-%d","index":%d,"az":"z1","address":"10.0.%d.%d","bootstrap":%t}`, i, i, i/250, i%250, i == 0)
	}
	b.WriteString(`]}}`)
	return b.String()
}

// batch is jobs × perJob templates from tpl, every job consuming the same
// link (one *Map, as the gathering's instances of a group share it).
func batch(jobs, perJob int, links string, tpl func(int) string) []ruby.Job {
	shared, _ := spec(propsP(nil), links).Get("links")
	out := make([]ruby.Job, jobs)
	for j := range out {
		s := spec(propsP(nil), "")
		s.Set("index", int64(j))
		s.Set("links", shared)
		out[j].Spec = s
		for t := range perJob {
			out[j].Templates = append(out[j].Templates, ruby.Template{Name: fmt.Sprintf("t%d.erb", t), Source: tpl(t)})
		}
	}
	return out
}

// BenchmarkRenderCurve prints two curves measured in one run: a batch of
// 100, 500 and 2000 realistic templates (jobs of 10), and 200 trivial
// templates (20 jobs of 10) consuming a link of 2, 100 and 1000 instances.
// Linear costs give ratios near 20 and near 1.
func BenchmarkRenderCurve(b *testing.B) {
	ctx := context.Background()
	timed := func(jobs []ruby.Job) float64 {
		start := time.Now()
		out, err := ruby.Render(ctx, jobs)
		if err != nil {
			b.Fatal(err)
		}
		for _, job := range out {
			for _, o := range job {
				if o.Error != "" {
					b.Fatal(o.Error)
				}
			}
		}
		return float64(time.Since(start).Milliseconds())
	}
	trivial := func(int) string {
		return `<%= p('port') %> <%= spec.index %> <%= spec.address %> <%= link('db').p('port') %> <%= link('db').address %>`
	}
	for b.Loop() {
		var ms []float64
		for _, n := range []int{100, 500, 2000} {
			ms = append(ms, timed(batch(n/10, 10, dbLink, realisticTemplate)))
			b.ReportMetric(ms[len(ms)-1], fmt.Sprintf("templates-%d-ms", n))
		}
		b.ReportMetric(ms[2]/ms[0], "templates-2000/100")
		ms = ms[:0]
		for _, n := range []int{2, 100, 1000} {
			ms = append(ms, timed(batch(20, 10, linkWith(n), trivial)))
			b.ReportMetric(ms[len(ms)-1], fmt.Sprintf("link-%d-ms", n))
		}
		b.ReportMetric(ms[2]/ms[0], "link-1000/2")
	}
}

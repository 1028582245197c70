package ruby_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/ruby"
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

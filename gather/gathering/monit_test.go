package gathering_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// A release whose monit files decide what runs: svc (with bpm.yml) only
// when enabled, as loggregator-agent's jobs do; legacy (monit only) only
// on the bootstrap instance.
var monitRelease = map[string]string{
	"jobs/svc/spec": `---
name: svc
templates: {bpm.yml.erb: config/bpm.yml}
properties:
  enabled: {default: true}
`,
	"jobs/svc/monit": `<% if p("enabled") -%>
check process svc
  with pidfile /var/vcap/sys/run/bpm/svc/svc.pid
  start program "/var/vcap/jobs/bpm/bin/bpm start svc"
  stop program "/var/vcap/jobs/bpm/bin/bpm stop svc"
  group vcap
<% end -%>
`,
	"jobs/svc/templates/bpm.yml.erb": `processes:
- name: svc
  executable: /var/vcap/packages/svc/bin/svc
`,
	"jobs/legacy/spec": `---
name: legacy
templates: {}
`,
	"jobs/legacy/monit": `<% if spec.bootstrap -%>
check process legacy
  with pidfile /var/vcap/sys/run/legacy/legacy.pid
  start program "/var/vcap/jobs/legacy/bin/ctl start"
  stop program "/var/vcap/jobs/legacy/bin/ctl stop"
<% end -%>
`,
}

const monitManifest = `---
name: mon
releases: [{name: mon, version: "1"}]
stemcells: [{alias: default, os: ubuntu-noble, version: "1"}]
update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000, update_watch_time: 1000}
instance_groups:
- name: quiet
  azs: [z1]
  instances: 2
  networks: [{name: default}]
  jobs:
  - {name: svc, release: mon, properties: {enabled: false}}
  - {name: legacy, release: mon}
- name: busy
  azs: [z1]
  instances: 1
  networks: [{name: default}]
  jobs:
  - {name: svc, release: mon}
`

// BOSH starts what a job's monit files check once rendered for the
// instance: a job its properties disable runs none of its bpm.yml's
// processes, and a monit-only job checking its process on the bootstrap
// instance alone runs it there alone.
func TestMonitRenderedPerInstance(t *testing.T) {
	root := t.TempDir()
	if err := fixtures.WriteTree(root, monitRelease); err != nil {
		t.Fatal(err)
	}
	vars := variables.NewMapSource(nil)
	m, err := deployment.Load([]byte(monitManifest), nil, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: deployment.SourceTreeSpecs(map[string]string{"mon": root}), Variables: vars,
		Network: instance.Network{Namespace: "ns", ClusterDomain: "cluster.local"}})
	if err != nil {
		t.Fatal(err)
	}
	all, err := gathering.NewRenderBPM(context.Background(), ruby.Renderer{})(d)
	if err != nil {
		t.Fatal(err)
	}
	// Rendering some instances only (the template command's
	// --instance-group) decides the same for the others.
	some, err := gathering.RenderDeployment(context.Background(), ruby.Renderer{}, d, gathering.GatherIP, func(group string, index int) bool {
		return group == "quiet" && index == 1
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := map[string]bpm.Config{"svc": {Processes: []bpm.Process{{Name: "svc", Executable: "/var/vcap/packages/svc/bin/svc"}}}}
	want := [][]bpm.InstanceBPM{
		{
			{Indexes: []int{0}, Jobs: svc, Idle: []string{"svc"}, Monit: map[string][]string{"legacy": {"legacy"}}},
			{Indexes: []int{1}, Jobs: svc, Idle: []string{"svc", "legacy"}},
		},
		{{Indexes: []int{0}, Jobs: svc}},
	}
	for _, got := range [][][]bpm.InstanceBPM{all, some.BPM} {
		// bpm.yml's defaults (env, workdir…) aside: what runs is compared.
		for gi := range got {
			for i := range got[gi] {
				for job, c := range got[gi][i].Jobs {
					for pi := range c.Processes {
						c.Processes[pi] = bpm.Process{Name: c.Processes[pi].Name, Executable: c.Processes[pi].Executable}
					}
					got[gi][i].Jobs[job] = c
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got\n%+v\nwant\n%+v", got, want)
		}
	}
}

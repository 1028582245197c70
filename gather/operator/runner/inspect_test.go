package runner_test

import (
	"slices"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/operator/runner"
)

// The deployments a manifest consumes shared links from are inputs of its
// gathering, whether named by an instance group's job or an addon's.
func TestInspectConsumes(t *testing.T) {
	manifest := []byte(`name: web
releases: [{name: app, version: "1", url: localhost/x}]
stemcells: [{alias: default, os: ubuntu-noble, version: "1"}]
update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000, update_watch_time: 1000}
instance_groups:
- name: app
  jobs:
  - name: web
    release: app
    consumes:
      db: {from: db, deployment: data}
      self: {from: x, deployment: web}
      cache: nil
addons:
- name: metrics
  jobs: [{name: agent, release: app, consumes: {sink: {from: sink, deployment: ((metrics_deployment))}}}]
`)
	ops := []deployment.OpsFile{{Name: "ops-01-more.yml", Data: []byte("- type: replace\n  path: /instance_groups/name=app/jobs/name=web/consumes/queue?\n  value: {from: q, deployment: bus}\n")}}
	in, err := runner.Inspect(manifest, ops)
	if err != nil {
		t.Fatal(err)
	}
	// A deployment given by a variable is known only once gather
	// interpolates it: the runner cannot watch it.
	if want := []string{"bus", "data"}; !slices.Equal(in.Consumes, want) {
		t.Errorf("consumes %v, want %v", in.Consumes, want)
	}
}

// The other deployments a manifest's DNS aliases target are inputs of its
// gathering too: their groups and instances are in its records.
func TestInspectAliasTargets(t *testing.T) {
	manifest := []byte(`name: web
releases: [{name: app, version: "1", url: localhost/x}]
stemcells: [{alias: default, os: ubuntu-noble, version: "1"}]
update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000, update_watch_time: 1000}
instance_groups:
- name: app
  jobs:
  - name: bosh-dns-aliases
    release: app
    properties:
      aliases:
      - domain: _.db.internal
        targets: [{query: _, instance_group: pg, deployment: data}, {query: "*", instance_group: app, deployment: web}]
addons:
- name: dns
  jobs:
  - name: bosh-dns-aliases
    release: app
    properties:
      aliases:
      - {domain: q.internal, targets: [{query: "*", instance_group: q, deployment: bus}, {query: "*", instance_group: x, deployment: ((other))}]}
  - name: other-job
    release: app
    properties: {aliases: [{domain: not.internal, targets: [{query: "*", instance_group: y, deployment: nope}]}]}
`)
	in, err := runner.Inspect(manifest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bus", "data"}; !slices.Equal(in.AliasTargets, want) {
		t.Errorf("alias targets %v, want %v", in.AliasTargets, want)
	}
}

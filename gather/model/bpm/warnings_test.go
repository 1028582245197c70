package bpm_test

import (
	"slices"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
)

// A volume without allow_executions, a shared one, a pre_start hook and
// limits.open_files warn, per job, process and path, for the instance they apply to only.
func TestWarnings(t *testing.T) {
	openFiles := uint64(100000)
	web := bpm.Process{Name: "web", Hooks: &bpm.Hooks{PreStart: "/var/vcap/jobs/shop/bin/hook"}, Limits: &bpm.Limits{OpenFiles: &openFiles}, AdditionalVolumes: []bpm.Volume{{Path: "/var/vcap/data/web/cache"}},
		Unsafe: &bpm.Unsafe{UnrestrictedVolumes: []bpm.Volume{{Path: "/srv", AllowExecutions: true, Shared: true}}}}
	info := &bpm.Info{Jobs: []bpm.Job{{Name: "shop"}}, BPM: []bpm.InstanceBPM{
		{Indexes: []int{0}, Jobs: map[string]bpm.Config{"shop": {Processes: []bpm.Process{web}}}},
		{Indexes: []int{1}, Jobs: map[string]bpm.Config{"shop": {}}},
	}}
	want := []string{
		"job 'shop', process 'web': " + bpm.WarnHookCapabilities,
		"job 'shop', process 'web': " + bpm.WarnOpenFiles,
		"job 'shop', process 'web', volume /var/vcap/data/web/cache: " + bpm.WarnExecutableMount,
		"job 'shop', process 'web', volume /srv: " + bpm.WarnSharedMount,
	}
	if got := info.Warnings(0); !slices.Equal(got, want) {
		t.Errorf("index 0: got %q, want %q", got, want)
	}
	if got := info.Warnings(1); got != nil {
		t.Errorf("index 1: got %q, want none", got)
	}
}

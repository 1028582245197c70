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

// A job asking for the persistent disk (persistent_disk or a volume under
// /var/vcap/store) in a group without one warns once for the group, naming
// the jobs; with a disk (EphemeralStore unset) it does not.
func TestWarningsStoreWithoutDisk(t *testing.T) {
	configs := map[string]bpm.Config{
		"svc":   {Processes: []bpm.Process{{Name: "svc", PersistentDisk: true}}},
		"cache": {Processes: []bpm.Process{{Name: "cache", AdditionalVolumes: []bpm.Volume{{Path: "/var/vcap/store/cache/blobs", AllowExecutions: true}}}}},
		"web":   {Processes: []bpm.Process{{Name: "web"}}},
	}
	info := &bpm.Info{Jobs: []bpm.Job{{Name: "svc"}, {Name: "cache"}, {Name: "web"}}, BPM: []bpm.InstanceBPM{{Indexes: []int{0}, Jobs: configs}}}
	if !info.StoresData() {
		t.Error("StoresData is false")
	}
	if got := info.Warnings(0); got != nil {
		t.Errorf("with a disk: got %q, want none", got)
	}
	info.EphemeralStore = true
	want := []string{"jobs 'svc', 'cache' store data in /var/vcap/store: " + bpm.WarnEphemeralStore}
	if got := info.Warnings(0); !slices.Equal(got, want) {
		t.Errorf("without a disk: got %q, want %q", got, want)
	}
}

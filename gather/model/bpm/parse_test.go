package bpm_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
)

// T38: validation in BPM's order with its messages.
func TestValidation(t *testing.T) {
	cases := map[string]string{
		"a":      `{name: web, executable: ""}`,
		"b":      `{name: web, executable: /bin/x, additional_volumes: [{path: /var/vcap/data/web}]}`,
		"c":      `{name: web, executable: /bin/x, additional_volumes: [{path: /var/vcap/data/shared/}]}`,
		"d":      `{name: web, executable: /bin/x, additional_volumes: [{path: /srv/data}]}`,
		"e":      `{name: web, executable: /bin/x, shutdown_signal: KILL}`,
		"name":   `{executable: /bin/x}`,
		"vcap":   `{name: web, executable: /bin/x, additional_volumes: [{path: /var/vcap}]}`,
		"memory": `{name: web, executable: /bin/x, limits: {memory: 1 parsec}}`,
		"shape":  `{name: web, executable: /bin/x, args: x}`,
	}
	want := map[string]string{
		"a":      "invalid config: executable",
		"b":      "invalid volume path: /var/vcap/data/web cannot conflict with default job data or store directories",
		"c":      "volume path must be canonical, expected /var/vcap/data/shared but got /var/vcap/data/shared/",
		"d":      "invalid volume path: /srv/data must be within /var/vcap",
		"e":      "shutdown signal should either be 'TERM' or 'INT' (or left unspecified), but got 'KILL'",
		"name":   "invalid config: name",
		"vcap":   "invalid volume path: /var/vcap must be within /var/vcap",
		"memory": "byte quantity must be a positive integer with a unit of measurement like M, MB, MiB, G, GiB, or GB",
		"shape":  "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `x` into []string",
	}
	for name, entry := range cases {
		_, err := bpm.Parse([]byte("processes: ["+entry+"]"), "web")
		if err == nil || err.Error() != "failed to parse job configuration: "+want[name] {
			t.Errorf("%s: got %v, want %q", name, err, want[name])
		}
	}
}

// T38f and the defaults.
func TestDefaultsAndLenientScalars(t *testing.T) {
	c, err := bpm.Parse([]byte(`processes:
- name: web
  executable: /bin/x
  args: [--port, 2424, yes]
  env: {DEBUG: 1, HOME: /home/web}
  hooks: {}
  unknown_key: ignored
  limits: {memory: 1G}
`), "web")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Processes[0]
	if !reflect.DeepEqual(p.Args, []string{"--port", "2424", "yes"}) {
		t.Errorf("args %q", p.Args)
	}
	if p.Workdir != "/var/vcap/jobs/web" || p.Hooks != nil {
		t.Errorf("workdir %q hooks %v", p.Workdir, p.Hooks)
	}
	want := map[string]string{"DEBUG": "1", "HOME": "/home/web", "TMPDIR": "/var/vcap/data/web/tmp", "LANG": "en_US.UTF-8",
		"PATH": "/var/vcap/jobs/web/bin:/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin:."}
	if !reflect.DeepEqual(p.Env, want) {
		t.Errorf("env %v", p.Env)
	}
}

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{"1G": 1 << 30, "512m": 512 << 20, "2KiB": 2048, "10b": 10, "3 GB": 3 << 30} {
		if got, err := bpm.ParseMemory(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	for _, in := range []string{"", "0M", "-1G", "1X", "G", "1.5G"} {
		if _, err := bpm.ParseMemory(in); err == nil || !strings.HasPrefix(err.Error(), "byte quantity") {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func TestGroup(t *testing.T) {
	a := map[string]bpm.Config{"web": {Processes: []bpm.Process{{Name: "web", Executable: "/a"}}}}
	b := map[string]bpm.Config{"web": {Processes: []bpm.Process{{Name: "web", Executable: "/a", Args: []string{"--bootstrap"}}}}}
	got := bpm.Group([]int{0, 1, 2}, []bpm.InstanceBPM{{Jobs: b}, {Jobs: a}, {Jobs: a}})
	if len(got) != 2 || !reflect.DeepEqual(got[0].Indexes, []int{0}) || !reflect.DeepEqual(got[1].Indexes, []int{1, 2}) {
		t.Errorf("got %+v", got)
	}
	// The same bpm.yml, another monit: instance 1's monit checks nothing.
	got = bpm.Group([]int{0, 1, 2}, []bpm.InstanceBPM{{Jobs: a}, {Jobs: a, Idle: []string{"web"}}, {Jobs: a}})
	if len(got) != 2 || !reflect.DeepEqual(got[0].Indexes, []int{0, 2}) || !reflect.DeepEqual(got[1].Indexes, []int{1}) {
		t.Errorf("got %+v", got)
	}
}

func TestCheckPodVolumes(t *testing.T) {
	for path, want := range map[string]string{
		"/var/vcap/jobs/*/config/route_registrar": "",
		"/var/vcap/data/sockets":                  "",
		"/srv/plain":                              "",
		"/srv/*/x":                                "job 'j', process 'p': unsafe.unrestricted_volumes path /srv/*/x is a glob over /srv/: BPM expands it on the VM at each start, a pod's volumes are fixed at admission; list the paths, or glob below a directory of /var/vcap/",
		"/var/vcap/*":                             "job 'j', process 'p': unsafe.unrestricted_volumes path /var/vcap/* is a glob over /var/vcap/: BPM expands it on the VM at each start, a pod's volumes are fixed at admission; list the paths, or glob below a directory of /var/vcap/",
	} {
		c := bpm.Config{Processes: []bpm.Process{{Name: "p", Unsafe: &bpm.Unsafe{UnrestrictedVolumes: []bpm.Volume{{Path: path, MountOnly: true}}}}}}
		got := ""
		if err := c.CheckPodVolumes("j"); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", path, got, want)
		}
	}
	if root, ok := bpm.GlobRoot("/var/vcap/jobs/*/config/route_registrar"); !ok || root != "/var/vcap/jobs" {
		t.Errorf("GlobRoot = %q, %v", root, ok)
	}
}

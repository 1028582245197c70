package bpm

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// errorPrefix is how BPM wraps every configuration error.
const errorPrefix = "failed to parse job configuration: "

// Parse reads a rendered bpm.yml of job as BPM does (typed go-yaml v3
// decoding: unknown keys ignored, scalars decoded leniently into strings, a
// wrong shape an error), validates it and applies BPM's defaults.
func Parse(data []byte, job string) (Config, error) {
	var c Config
	// A template renders bpm.yml: bounded before yaml.v3 builds its nodes.
	if err := yamlvalue.CheckValues(data); err != nil {
		return Config{}, errors.New(errorPrefix + err.Error())
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return Config{}, errors.New(errorPrefix + err.Error())
	}
	if err := c.Validate(job); err != nil {
		return Config{}, err
	}
	c.applyDefaults(job)
	return c, nil
}

// Validate checks c in BPM's order and with its messages.
func (c *Config) Validate(job string) error {
	for _, p := range c.Processes {
		if err := p.validate(job); err != nil {
			return errors.New(errorPrefix + err.Error())
		}
	}
	return nil
}

func (p *Process) validate(job string) error {
	if p.Name == "" {
		return errors.New("invalid config: name")
	}
	if p.Executable == "" {
		return errors.New("invalid config: executable")
	}
	for _, v := range p.AdditionalVolumes {
		clean := path.Clean(v.Path)
		switch {
		case clean != v.Path:
			return fmt.Errorf("volume path must be canonical, expected %s but got %s", clean, v.Path)
		case v.Path == path.Join("/var/vcap/data", job) || v.Path == path.Join("/var/vcap/store", job):
			return fmt.Errorf("invalid volume path: %s cannot conflict with default job data or store directories", v.Path)
		case !strings.HasPrefix(v.Path, "/var/vcap/"):
			return fmt.Errorf("invalid volume path: %s must be within /var/vcap", v.Path)
		}
	}
	if s := p.ShutdownSignal; s != "" && s != "TERM" && s != "INT" {
		return fmt.Errorf("shutdown signal should either be 'TERM' or 'INT' (or left unspecified), but got '%s'", s)
	}
	if p.Limits != nil && p.Limits.Memory != nil {
		if _, err := ParseMemory(*p.Limits.Memory); err != nil {
			return err
		}
	}
	return nil
}

// applyDefaults sets what BPM assumes when bpm.yml leaves it out: the
// working directory and the environment. An empty `hooks: {}` is
// taken as absent: BPM itself fails on it with "exec: no command".
func (c *Config) applyDefaults(job string) {
	for i := range c.Processes {
		p := &c.Processes[i]
		if p.Workdir == "" {
			p.Workdir = "/var/vcap/jobs/" + job
		}
		if p.Env == nil {
			p.Env = map[string]string{}
		}
		for k, v := range DefaultEnv(job) {
			if _, set := p.Env[k]; !set {
				p.Env[k] = v
			}
		}
		if p.Hooks != nil && p.Hooks.PreStart == "" {
			p.Hooks = nil
		}
	}
}

// DefaultEnv is the environment BPM gives a job's processes unless bpm.yml
// sets the same variables.
func DefaultEnv(job string) map[string]string {
	return map[string]string{
		"TMPDIR": "/var/vcap/data/" + job + "/tmp",
		"HOME":   "/var/vcap/data/" + job,
		"LANG":   "en_US.UTF-8",
		"PATH":   "/var/vcap/jobs/" + job + "/bin:/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin:.",
	}
}

var memoryRE = regexp.MustCompile(`^([0-9]+)\s*([A-Za-z]*)$`)

// ParseMemory reads a BPM memory limit: a positive number and a
// case-insensitive unit, always 1024-based (B, K, KB, KiB, M, ... E).
func ParseMemory(s string) (int64, error) {
	errBad := errors.New("byte quantity must be a positive integer with a unit of measurement like M, MB, MiB, G, GiB, or GB")
	m := memoryRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, errBad
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n <= 0 {
		return 0, errBad
	}
	unit := strings.ToUpper(m[2])
	shift := map[string]uint{"B": 0, "K": 10, "KB": 10, "KIB": 10, "M": 20, "MB": 20, "MIB": 20,
		"G": 30, "GB": 30, "GIB": 30, "T": 40, "TB": 40, "TIB": 40, "P": 50, "PB": 50, "PIB": 50, "E": 60, "EB": 60, "EIB": 60}
	s2, ok := shift[unit]
	if !ok || n > (1<<62)>>s2 {
		return 0, errBad
	}
	return n << s2, nil
}

// Group groups instances that start the same: each[i] is what instance
// indexes[i] starts (its Indexes unset). Groups keep the order of first
// appearance, so the common case comes first. Entries are compared by
// their encoding (map keys sorted), which is what the webhook reads, in
// one pass: a group of instances rendered per index is as many entries
// as instances.
func Group(indexes []int, each []InstanceBPM) []InstanceBPM {
	var out []InstanceBPM
	seen := map[string]int{}
	for i, e := range each {
		// An entry always encodes (strings, bools, numbers, nested of them).
		data, _ := json.Marshal(e)
		if g, ok := seen[string(data)]; ok {
			out[g].Indexes = append(out[g].Indexes, indexes[i])
			continue
		}
		seen[string(data)] = len(out)
		e.Indexes = []int{indexes[i]}
		out = append(out, e)
	}
	return out
}

package bpm

import (
	"fmt"
	"strings"
)

// GlobRoot is the directory holding every match of a volume path that is a
// glob: the path up to its first element with a glob character. ok is false
// for a path without one. BPM expands unrestricted volume globs on the VM
// at each start; a pod mounts the pod volume holding GlobRoot instead,
// which holds every match there may be.
func GlobRoot(path string) (root string, ok bool) {
	elems := strings.Split(path, "/")
	for i, e := range elems {
		if strings.ContainsAny(e, "*?[") {
			return strings.Join(elems[:i], "/"), true
		}
	}
	return "", false
}

// globParent is the shortest GlobRoot a pod can mount: a directory of
// /var/vcap (jobs, data, store, sys, ...), whose pod volume holds the matches.
const globParent = "/var/vcap/"

// CheckPodVolumes refuses what BPM accepts but a pod cannot give as BPM
// does, naming job, process and field: an unrestricted volume glob whose
// matches are not under one directory of /var/vcap (the node's paths, or
// /var/vcap itself), which BPM expands on the VM at each start while a
// pod's volumes are fixed at admission. Gathering calls it, so the webhook
// never has to deny a pod for it.
func (c *Config) CheckPodVolumes(job string) error {
	for _, p := range c.Processes {
		if p.Unsafe == nil {
			continue
		}
		for _, v := range p.Unsafe.UnrestrictedVolumes {
			root, ok := GlobRoot(v.Path)
			if ok && !strings.HasPrefix(root+"/", globParent) || ok && root+"/" == globParent {
				return fmt.Errorf("job '%s', process '%s': unsafe.unrestricted_volumes path %s is a glob over %s: BPM expands it on the VM at each start, a pod's volumes are fixed at admission; list the paths, or glob below a directory of %s", job, p.Name, v.Path, root+"/", globParent)
			}
		}
	}
	return nil
}

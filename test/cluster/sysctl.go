package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kubeletSysctls are the machine-wide settings the kubelet rewrites when it
// starts (its kernel tunables) and never looks at again. This machine is
// shared: they are saved before the kubelet starts and put back as soon as
// the node is Ready, and again at teardown.
var kubeletSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

func saveSysctls() (map[string]string, error) {
	saved := map[string]string{}
	for _, key := range kubeletSysctls {
		data, err := os.ReadFile(sysctlPath(key))
		if err != nil {
			return nil, fmt.Errorf("reading sysctl %s: %w", key, err)
		}
		saved[key] = strings.TrimSpace(string(data))
	}
	return saved, nil
}

// restoreSysctls writes back the saved values that changed, holding the
// sysctl lock so that no other cluster's kubelet is starting meanwhile.
func restoreSysctls(saved map[string]string) error {
	if len(saved) == 0 {
		return nil
	}
	unlock, err := lockSysctls()
	if err != nil {
		return err
	}
	defer unlock()
	return writeSysctls(saved)
}

func writeSysctls(saved map[string]string) error {
	var errs []error
	for key, want := range saved {
		data, err := os.ReadFile(sysctlPath(key))
		if err == nil && strings.TrimSpace(string(data)) == want {
			continue
		}
		if err := os.WriteFile(sysctlPath(key), []byte(want), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("putting sysctl %s back to %s: %w", key, want, err))
		}
	}
	return errors.Join(errs...)
}

// lockSysctls serializes the window from saving the sysctls to putting
// them back across every cluster on this machine: a kubelet starting in
// another cluster meanwhile would have its rewritten values saved as the
// machine's.
func lockSysctls() (unlock func(), err error) {
	f, err := lockFile(filepath.Join(stateRoot, "sysctl.lock"), true)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

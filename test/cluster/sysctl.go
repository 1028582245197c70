package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// MachineSysctls are the machine's values of the settings the kubelet
// rewrites, read while no cluster's kubelet is starting (under the sysctl
// lock), one "key = value" line each.
func MachineSysctls() (string, error) {
	unlock, err := lockSysctls()
	if err != nil {
		return "", err
	}
	defer unlock()
	saved, err := saveSysctls()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, key := range kubeletSysctls {
		fmt.Fprintf(&b, "%s = %s\n", key, saved[key])
	}
	return b.String(), nil
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

// inotifyInstances is the per-user limit of inotify instances, 128 by
// default. Every kubelet, containerd, control plane and operator of the
// clusters here takes some, all as root: three clusters beside the suites'
// control planes took 129, and the next watcher failed ("too many open
// files"). The first cluster to start raises it to inotifyWant; the last
// to go puts the machine's value back.
const (
	inotifyInstances = "fs.inotify.max_user_instances"
	inotifyWant      = 1024
)

func inotifySaved() string { return filepath.Join(stateRoot, "inotify-instances.saved") }

// raiseInotify raises the limit, saving the machine's value first unless
// a running cluster saved it already; under the sysctl lock.
func raiseInotify() error {
	data, err := os.ReadFile(sysctlPath(inotifyInstances))
	if err != nil {
		return fmt.Errorf("reading sysctl %s: %w", inotifyInstances, err)
	}
	current, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || current >= inotifyWant {
		return err
	}
	if _, err := os.Stat(inotifySaved()); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(inotifySaved(), data, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(sysctlPath(inotifyInstances), []byte(strconv.Itoa(inotifyWant)), 0o644); err != nil {
		return fmt.Errorf("raising sysctl %s to %d: %w", inotifyInstances, inotifyWant, err)
	}
	return nil
}

// restoreInotify puts the machine's limit back once no cluster is left.
func restoreInotify() error {
	unlock, err := lockSysctls()
	if err != nil {
		return err
	}
	defer unlock()
	if records, _ := filepath.Glob(filepath.Join(stateRoot, "*.json")); len(records) > 0 {
		return nil
	}
	saved, err := os.ReadFile(inotifySaved())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(sysctlPath(inotifyInstances), saved, 0o644); err != nil {
		return fmt.Errorf("putting sysctl %s back: %w", inotifyInstances, err)
	}
	return os.Remove(inotifySaved())
}

package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// agentPath is the PATH the agent runs job scripts with.
const agentPath = "/usr/sbin:/usr/bin:/sbin:/bin"

// Scripts runs a job's lifecycle scripts as the agent does (bin/dns/healthy
// aside, see DNSHealthy): as root, from
// /var/vcap/jobs/<job>/bin, output appended to
// /var/vcap/sys/log/<job>/<script>.stdout.log and .stderr.log, and echoed to
// the container's own output.
type Scripts struct {
	// VCAP is /var/vcap (a temporary directory in tests).
	VCAP string
	// Out and Err receive the scripts' output besides the log files.
	Out, Err io.Writer
	// NextState is what pre-stop is told comes next; PreStopEnv (the pod
	// is deleted) when nil.
	NextState []string
}

func (s Scripts) path(job, script string) string {
	return filepath.Join(s.VCAP, "jobs", job, "bin", script)
}

// run runs a script with args and extra environment and returns its stdout
// and the tail of its whole output.
func (s Scripts) run(ctx context.Context, job, script string, env []string, args ...string) (stdout, tail string, err error) {
	logDir := filepath.Join(s.VCAP, "sys", "log", job)
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		return "", "", err
	}
	name := filepath.Base(script)
	open := func(stream string) (*os.File, error) {
		return os.OpenFile(filepath.Join(logDir, name+"."+stream+".log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o640)
	}
	outFile, err := open("stdout")
	if err != nil {
		return "", "", err
	}
	defer outFile.Close()
	errFile, err := open("stderr")
	if err != nil {
		return "", "", err
	}
	defer errFile.Close()

	var out, all bytes.Buffer
	cmd := exec.CommandContext(ctx, s.path(job, script), args...)
	cmd.Env = append(os.Environ(), "PATH="+agentPath)
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = filepath.Join(s.VCAP, "jobs", job)
	cmd.Stdout = io.MultiWriter(outFile, &out, &all, s.Out)
	cmd.Stderr = io.MultiWriter(errFile, &all, s.Err)
	cmd.WaitDelay = time.Second
	err = runChild(cmd)
	if err != nil {
		err = fmt.Errorf("%s of job '%s' failed: %w", script, job, err)
	}
	return out.String(), tailOf(all.String(), 1024), err
}

// PostStart runs bin/post-start.
func (s Scripts) PostStart(ctx context.Context, job string) (string, error) {
	_, tail, err := s.run(ctx, job, contract.PostStart, nil)
	return tail, err
}

// PostStop runs bin/post-stop.
func (s Scripts) PostStop(ctx context.Context, job string) error {
	_, _, err := s.run(ctx, job, contract.PostStop, nil)
	return err
}

// PreStopEnv is what the director tells pre-stop when a pod is deleted: the
// pod (the VM) goes, the instance and the deployment stay (a StatefulSet
// recreates the pod; a scale-down cannot be told apart at this point).
var PreStopEnv = []string{"BOSH_VM_NEXT_STATE=delete", "BOSH_INSTANCE_NEXT_STATE=keep", "BOSH_DEPLOYMENT_NEXT_STATE=keep"}

// StopEnv is what the director tells pre-stop on `bosh stop`: the VM, the
// instance and the deployment stay.
var StopEnv = []string{"BOSH_VM_NEXT_STATE=keep", "BOSH_INSTANCE_NEXT_STATE=keep", "BOSH_DEPLOYMENT_NEXT_STATE=keep"}

// DeleteEnv is what the director tells pre-stop on `bosh
// delete-deployment`: everything goes.
var DeleteEnv = []string{"BOSH_VM_NEXT_STATE=delete", "BOSH_INSTANCE_NEXT_STATE=delete", "BOSH_DEPLOYMENT_NEXT_STATE=delete"}

// PreStop runs bin/pre-stop.
func (s Scripts) PreStop(ctx context.Context, job string) error {
	env := PreStopEnv
	if s.NextState != nil {
		env = s.NextState
	}
	_, _, err := s.run(ctx, job, contract.PreStop, env)
	return err
}

// Drain runs bin/drain with the agent's protocol for a shutdown: the
// arguments job_shutdown hash_unchanged, BOSH_JOB_STATE and
// BOSH_JOB_NEXT_STATE as JSON; stdout is an integer: n >= 0 waits n seconds
// and ends, n < 0 waits -n seconds and asks again with job_check_status
// (without BOSH_JOB_NEXT_STATE), until the answer is not negative. It
// returns how many status rounds ran.
func (s Scripts) Drain(ctx context.Context, job string, persistentDiskMB int) (int, error) {
	state, _ := json.Marshal(map[string]int{"persistent_disk": persistentDiskMB})
	env := []string{"BOSH_JOB_STATE=" + string(state), "BOSH_JOB_NEXT_STATE=" + string(state)}
	args := []string{"job_shutdown", "hash_unchanged"}
	for rounds := 0; ; rounds++ {
		out, _, err := s.run(ctx, job, contract.Drain, env, args...)
		if err != nil {
			return rounds, err
		}
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			return rounds, fmt.Errorf("drain of job '%s': script did not return a signed integer: %q", job, strings.TrimSpace(out))
		}
		wait := time.Duration(max(n, -n)) * time.Second
		select {
		case <-ctx.Done():
			return rounds, fmt.Errorf("drain of job '%s': %w", job, ctx.Err())
		case <-time.After(wait):
		}
		if n >= 0 {
			return rounds, nil
		}
		env = env[:1]
		args = []string{"job_check_status", "hash_unchanged"}
	}
}

// DNSHealthy runs bin/dns/healthy, as the agent's health check does, but
// as uid, the user of the process it checks. The agent runs it as root on
// the VM, where root may read every process's /proc entries; a container's
// root lacks CAP_SYS_PTRACE, which that takes for another user's process,
// so a check looking for the process's sockets (doppler's `lsof -i`)
// would never see them. As the process's own user it does.
func (s Scripts) DNSHealthy(ctx context.Context, job string, uid int) error {
	var all bytes.Buffer
	cmd := exec.CommandContext(ctx, s.path(job, contract.DNSHealthy))
	cmd.Env = append(os.Environ(), "PATH="+agentPath)
	if uid != 0 && os.Geteuid() == 0 {
		cmd.SysProcAttr = asUser(uid)
	}
	cmd.Stdout, cmd.Stderr = &all, &all
	cmd.WaitDelay = time.Second
	if err := runChild(cmd); err != nil {
		return fmt.Errorf("bin/dns/healthy of job '%s' failed: %w: %s", job, err, tailOf(all.String(), 512))
	}
	return nil
}

func tailOf(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

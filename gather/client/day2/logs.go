package day2

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/client/cluster"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// LogsName is the tarball's file name as `bosh logs` names it:
// "<deployment>[.<group>[.<index-or-id>]]-<yyyymmdd-hhmmss-nanos>.tgz".
func LogsName(deployment, spec string, now time.Time) string {
	name := deployment
	if spec != "" {
		group, id, _ := strings.Cut(spec, "/")
		name += "." + group
		if id != "" {
			name += "." + id
		}
	}
	return fmt.Sprintf("%s-%s.tgz", name, strings.ReplaceAll(now.Format("20060102-150405.999999999"), ".", "-"))
}

// FetchLogs writes the instances' /var/vcap/sys/log (only jobs' with
// jobs) as one gzipped tarball to w: one instance's files as they are, as
// the agent packs them; several instances' tarballs each as
// "<group>.<uuid>.tgz" in it, as the director bundles them.
func (d *Deployment) FetchLogs(ctx context.Context, instances []Instance, jobs []string, w io.Writer) error {
	if len(instances) == 1 {
		return d.instanceLogs(ctx, instances[0], jobs, w)
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, in := range instances {
		var buf bytes.Buffer
		if err := d.instanceLogs(ctx, in, jobs, &buf); err != nil {
			return err
		}
		hdr := &tar.Header{Name: in.Group + "." + in.ID + ".tgz", Mode: 0o644, Size: int64(buf.Len()), ModTime: time.Now()}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func (d *Deployment) instanceLogs(ctx context.Context, in Instance, jobs []string, w io.Writer) error {
	container, err := FirstProcess(in.Pod)
	if err != nil {
		return d.unreachable(in, "fetch its logs", err)
	}
	cmd := []string{contract.Binary, contract.LogArchive}
	for _, j := range jobs {
		cmd = append(cmd, "--job", j)
	}
	var errOut bytes.Buffer
	check := newGzipCheck(w)
	err = d.Exec(ctx, in.Pod, container, cmd, cluster.Streams{Stdout: check, Stderr: &errOut})
	whole := check.Close()
	if err != nil {
		return fmt.Errorf("Fetching logs of instance '%s' (pod %s): %w: %s", in.Name(), in.Pod.Name, err, strings.TrimSpace(errOut.String()))
	}
	if whole != nil {
		return fmt.Errorf("Fetching logs of instance '%s' (pod %s): the tarball arrived cut (%v), as an exec's streams can be: run logs again", in.Name(), in.Pod.Name, whole)
	}
	return nil
}

// unreachable is the director's error for an instance that cannot do what
// was asked, with what to do.
func (d *Deployment) unreachable(in Instance, what string, err error) error {
	return fmt.Errorf("Instance '%s' in deployment '%s' is not running (%v), unable to %s: see `bosh-injector instances -d %s --ps`, and `start` it if it is stopped", in.Name(), d.Name(), err, what, d.Name())
}

// FollowLogs follows the instances' job logs as `bosh logs -f` does (tail
// -F of the last lines, as root) until ctx ends; with several instances
// each line starts with its instance.
func (d *Deployment) FollowLogs(ctx context.Context, instances []Instance, jobs []string, lines int, out io.Writer) error {
	files := []string{"/var/vcap/sys/log/*/*.log"}
	if len(jobs) > 0 {
		files = nil
		for _, j := range jobs {
			files = append(files, "/var/vcap/sys/log/"+j+"/*.log")
		}
	}
	tail := fmt.Sprintf("exec tail -n %d -F %s", lines, strings.Join(files, " "))
	w := cluster.NewLines(out)
	errs := make([]error, len(instances))
	var wg sync.WaitGroup
	for i, in := range instances {
		container, err := FirstProcess(in.Pod)
		if err != nil {
			return d.unreachable(in, "follow its logs", err)
		}
		prefix := ""
		if len(instances) > 1 {
			prefix = in.Name()
		}
		wg.Go(func() {
			stream := w.Pipe(prefix)
			defer stream.Close()
			errs[i] = d.Exec(ctx, in.Pod, container, []string{contract.Binary, contract.Shell, "--root", "-c", tail}, cluster.Streams{Stdout: stream, Stderr: stream})
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("Following logs of instance '%s': %w", instances[i].Name(), err)
		}
	}
	return nil
}

// SSH runs command (a login shell when empty) in the instance's first
// process container as vcap, or root, as `bosh ssh` gives a shell as a
// user with sudo; it returns the command's exit status, ErrCut with an
// error when that never arrived (see cut.go).
func (d *Deployment) SSH(ctx context.Context, in Instance, root bool, command string, s cluster.Streams) (int, error) {
	container, err := FirstProcess(in.Pod)
	if err != nil {
		return 0, d.unreachable(in, "ssh into it", err)
	}
	cmd := []string{contract.Binary, contract.Shell}
	if root {
		cmd = append(cmd, "--root")
	}
	var trailer *exitTrailer
	if command != "" {
		trailer = &exitTrailer{w: cmp.Or[io.Writer](s.Stderr, io.Discard)}
		cmd = append(cmd, "-c", withExitStatus(command))
		s.Stderr = trailer
	}
	err = d.Exec(ctx, in.Pod, container, cmd, s)
	var exit interface{ ExitStatus() int }
	switch {
	case trailer != nil && !trailer.seen:
		_ = trailer.flush()
		return ErrCut, fmt.Errorf("ssh into instance '%s' (pod %s, container %s): the command's exit status never arrived (%v), so its output may be cut: "+
			"its container may have stopped (see `kubectl describe pod %s`); run it again", in.Name(), in.Pod.Name, container, cmp.Or[any](err, "the exec's streams ended early"), in.Pod.Name)
	case errors.As(err, &exit):
		return exit.ExitStatus(), nil
	case err != nil:
		return 0, fmt.Errorf("ssh into instance '%s' (pod %s, container %s): %w", in.Name(), in.Pod.Name, container, err)
	case trailer != nil:
		return trailer.code, nil
	}
	return 0, nil
}

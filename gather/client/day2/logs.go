package day2

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
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
		return d.Unreachable(in, "fetch its logs", err)
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

// Unreachable is the director's error for an instance that cannot do what
// was asked, with what to do.
func (d *Deployment) Unreachable(in Instance, what string, err error) error {
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
			return d.Unreachable(in, "follow its logs", err)
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

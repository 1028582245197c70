// Package podman runs a Pod, as the apiserver stored it, with real containers
// under `podman kube play`: there is no kubelet here, so this stands in for
// one in the end-to-end tests and the demo.
//
// Podman 4.3's kube play falls short of a kubelet in a few places. Adapt
// rewrites only those, each for the reason given where it is done; everything
// else (init containers in order, command, args, env, workingDir, users,
// capabilities, volume mounts and subPaths) is podman's own behaviour.
package podman

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Env is what Adapt needs from the cluster the pod came from.
type Env struct {
	// Secrets by name, for Secret volumes and secretKeyRef env.
	Secrets map[string]*corev1.Secret
	// PodIP replaces status.podIP; with --network=none only loopback exists.
	PodIP string
	// Network, when set, is the network the pod joins with address PodIP
	// (see Network).
	Network *Network
	// Dir holds the files Adapt creates (secret data, termination logs).
	Dir string
	// Prefix makes the names of podman's pod and volumes (named after the
	// pod) unique per run: podman shares volumes by name and refuses a
	// second pod of a name.
	Prefix string
	// Kubeconfig, when set, is how the pod reaches the apiserver instead of
	// its service-account token: the pod runs with host networking and every
	// container gets the file with KUBECONFIG pointing at it.
	Kubeconfig string
	// RegistriesConf, when set, is the node's registries.conf, which images
	// are pulled with (a local registry marked insecure, say).
	RegistriesConf string
	// Tokens are the directories projecting the pod's service-account
	// token volumes, by volume name (see Kubelet.API); with any, the pod
	// shares the host's network, where API reaches the apiserver.
	Tokens map[string]string
	API    *APIServer
}

// kubeconfigPath is where containers find Env.Kubeconfig.
const kubeconfigPath = "/var/run/podman-kubelet/kubeconfig"

// Run is a pod started by Play.
type Run struct {
	// Pod is the adapted pod.
	Pod      *corev1.Pod
	source   client.ObjectKey
	yamlPath string
	termLogs map[string]string // container name -> host file of its termination log
	volumes  []string
	hostNet  bool
	// registriesConf is Env.RegistriesConf.
	registriesConf string
	network        string
	podIP          string
}

// Adapt returns a copy of pod that podman 4.3 can play, and the run state
// needed to read results back.
func Adapt(pod *corev1.Pod, env Env) (*Run, error) {
	p := pod.DeepCopy()
	if env.Kubeconfig != "" || len(env.Tokens) > 0 {
		p.Spec.HostNetwork = true
	}
	run := &Run{Pod: p, source: client.ObjectKeyFromObject(pod), termLogs: map[string]string{}, hostNet: p.Spec.HostNetwork,
		registriesConf: env.RegistriesConf, podIP: env.PodIP}
	env.Network.attach(p, run)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	// kube play applies the label rule (63 characters) to annotation values
	// and refuses longer ones; nothing running in the pod reads them.
	for k, v := range p.Annotations {
		if len(v) > 63 {
			delete(p.Annotations, k)
		}
	}
	// Without it podman removes init containers after they ran, and their
	// logs with them.
	p.Annotations["io.podman.annotations.init.container.type"] = "always"
	// kube play names the pod after metadata.name; generateName pods (Jobs)
	// may come without one. The hostname stays the pod's, as a kubelet
	// sets it.
	name := p.Name
	if name == "" {
		name = strings.TrimSuffix(p.GenerateName, "-") + "-play"
	}
	if p.Spec.Hostname == "" {
		p.Spec.Hostname = name
	}
	p.Name = env.Prefix + name

	var volumes []corev1.Volume
	dropped := map[string]bool{}
	mountpoints := map[string]string{} // pod volume name -> podman volume's host directory
	for _, v := range p.Spec.Volumes {
		switch {
		case env.Tokens[v.Name] != "":
			// kube play rejects projected volumes: mount the projection.
			v.VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: env.Tokens[v.Name], Type: ptr.To(corev1.HostPathDirectory)}}
		case v.Projected != nil && (strings.HasPrefix(v.Name, "kube-api-access-") || isTokenVolume(v)):
			// A service-account token volume (the one the apiserver adds,
			// or the gather container's own) is rejected by kube play, and
			// without Kubelet.API nothing here serves tokens.
			dropped[v.Name] = true
			continue
		case v.Secret != nil:
			// A secret volume crashes kube play unless optional, and then
			// holds still-encoded data: mount the decoded files instead.
			dir, err := writeSecret(env, v.Secret.SecretName)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			v.VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)}}
		case v.EmptyDir != nil, v.PersistentVolumeClaim != nil:
			// An emptyDir becomes a podman volume named after it, shared by
			// name between pods and created 0755, so a non-root container
			// could not write after a root one: make a unique one, 0777.
			// A claim too: nothing provisions volumes here. Named after the
			// pod: the pods of a namespace run side by side.
			name := p.Name + "-" + v.Name
			mp, err := createVolume(name)
			if err != nil {
				return nil, err
			}
			mountpoints[v.Name] = mp
			run.volumes = append(run.volumes, name)
			v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
		}
		volumes = append(volumes, v)
	}
	p.Spec.Volumes = volumes
	if env.Kubeconfig != "" {
		if err := addKubeconfig(p, env); err != nil {
			return nil, err
		}
	}
	if len(env.Tokens) > 0 {
		apiEnv, err := env.API.apiEnv()
		if err != nil {
			return nil, err
		}
		for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range list {
				list[i].Env = append(list[i].Env, apiEnv...)
			}
		}
	}

	for _, list := range []*[]corev1.Container{&p.Spec.InitContainers, &p.Spec.Containers} {
		for i := range *list {
			c := &(*list)[i]
			if err := subPathMounts(c, p, mountpoints); err != nil {
				return nil, fmt.Errorf("container %s: %w", c.Name, err)
			}
			if err := adaptContainer(c, p, env, dropped, run); err != nil {
				return nil, fmt.Errorf("container %s: %w", c.Name, err)
			}
		}
	}
	// kube play applies the pod's restart policy to init containers too,
	// restarting a failed one at once and for ever, which hides how it
	// ended. Containers run once here; Report states what a kubelet would.
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "", ""
	p.Status = corev1.PodStatus{}
	// Objects read through a typed client come without their kind.
	p.APIVersion, p.Kind = "v1", "Pod"
	p.ManagedFields = nil
	p.OwnerReferences = nil

	data, err := yaml.Marshal(p)
	if err != nil {
		return nil, err
	}
	run.yamlPath = filepath.Join(env.Dir, p.Name+".yaml")
	return run, os.WriteFile(run.yamlPath, data, 0o644)
}

func adaptContainer(c *corev1.Container, p *corev1.Pod, env Env, dropped map[string]bool, run *Run) error {
	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if !dropped[m.Name] {
			mounts = append(mounts, m)
		}
	}
	c.VolumeMounts = mounts
	for i := range c.Env {
		e := &c.Env[i]
		if e.ValueFrom == nil {
			continue
		}
		// fieldRef works in kube play only for name, uid, labels and
		// annotations, and secretKeyRef does not read Secrets from the YAML:
		// resolve both here.
		switch {
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.namespace":
				e.Value = p.Namespace
			case "status.podIP":
				e.Value = env.PodIP
			case "spec.nodeName":
				e.Value = NodeName
			case "metadata.name":
				e.Value = p.Spec.Hostname
			default:
				continue
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s := env.Secrets[ref.Name]
			if s == nil || s.Data[ref.Key] == nil {
				return fmt.Errorf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			e.Value = string(s.Data[ref.Key])
		default:
			continue
		}
		e.ValueFrom = nil
	}
	// Keep termination messages: bind a host file at the container's
	// termination message path, as a kubelet does.
	path := c.TerminationMessagePath
	if path == "" {
		path = corev1.TerminationMessagePathDefault
	}
	hostFile := filepath.Join(env.Dir, "termination-"+c.Name)
	if err := os.WriteFile(hostFile, nil, 0o666); err != nil {
		return err
	}
	if err := os.Chmod(hostFile, 0o666); err != nil {
		return err
	}
	run.termLogs[c.Name] = hostFile
	volName := "termination-" + c.Name
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: hostFile, Type: ptr.To(corev1.HostPathFile)}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volName, MountPath: path})
	// kube play turns a liveness probe into a podman healthcheck run by
	// systemd timers, which are not here; the stand-in runs readiness probes
	// itself (lifecycle.go) and liveness probes not at all.
	c.LivenessProbe, c.StartupProbe = nil, nil
	return nil
}

// subPathMounts replaces a container's subPath mounts of emptyDir volumes:
// kube play ignores subPath and would mount the whole volume. Each becomes a
// hostPath mount of that directory of the podman volume, created as a kubelet
// does.
func subPathMounts(c *corev1.Container, p *corev1.Pod, mountpoints map[string]string) error {
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		root, ok := mountpoints[m.Name]
		if !ok || m.SubPath == "" {
			continue
		}
		dir := filepath.Join(root, filepath.Clean("/"+m.SubPath))
		if err := mkdirVolumeMode(root, dir); err != nil {
			return err
		}
		name := fmt.Sprintf("%s-sub-%d", m.Name, len(p.Spec.Volumes))
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)}}})
		m.Name, m.SubPath = name, ""
	}
	return nil
}

// mkdirVolumeMode creates dir and the directories between the volume's
// root and it with the volume's mode, 0777, as a kubelet creates subPath
// directories: a non-root container can then add a sibling (render making
// /var/vcap/sys/log/<job> of a job without processes).
func mkdirVolumeMode(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return err
	}
	path := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		path = filepath.Join(path, part)
		if err := os.Mkdir(path, 0o777); err != nil && !os.IsExist(err) {
			return err
		}
		if err := os.Chmod(path, 0o777); err != nil {
			return err
		}
	}
	return nil
}

// addKubeconfig mounts a readable copy of env.Kubeconfig into every
// container (they may run as any user) and points KUBECONFIG at it.
func addKubeconfig(p *corev1.Pod, env Env) error {
	data, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		return err
	}
	file := filepath.Join(env.Dir, "kubeconfig")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return err
	}
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "podman-kubeconfig", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: file, Type: ptr.To(corev1.HostPathFile)}}})
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			list[i].VolumeMounts = append(list[i].VolumeMounts, corev1.VolumeMount{Name: "podman-kubeconfig", MountPath: kubeconfigPath, ReadOnly: true})
			list[i].Env = append(list[i].Env, corev1.EnvVar{Name: "KUBECONFIG", Value: kubeconfigPath})
		}
	}
	return nil
}

func writeSecret(env Env, name string) (string, error) {
	s := env.Secrets[name]
	if s == nil {
		return "", fmt.Errorf("secret %s not given", name)
	}
	dir := filepath.Join(env.Dir, "secret-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func createVolume(name string) (string, error) {
	// A volume of this name is left from a run that was killed.
	if _, err := podman("volume", "rm", "--force", name); err != nil && !strings.Contains(err.Error(), "no such volume") {
		return "", err
	}
	if _, err := podman("volume", "create", name); err != nil {
		return "", err
	}
	mountpoint, err := podman("volume", "inspect", "--format", "{{.Mountpoint}}", name)
	if err != nil {
		return "", err
	}
	mountpoint = strings.TrimSpace(mountpoint)
	return mountpoint, os.Chmod(mountpoint, 0o777)
}

// Key is the key of the pod the run came from.
func (r *Run) Key() client.ObjectKey { return r.source }

// Play starts the adapted pod. Its containers run in the background; Wait
// collects their results.
func (r *Run) Play(ctx context.Context) error {
	args := append([]string{"kube", "play"}, r.networkArgs()...)
	// kube play builds images from ./<image name>/Containerfile when such a
	// folder exists in its working directory: run it from the run's own one.
	cmd := Command(ctx, append(args, r.yamlPath)...)
	cmd.Dir = filepath.Dir(r.yamlPath)
	// Images are pulled as the pod's imagePullPolicy says, as a kubelet
	// does.
	if r.registriesConf != "" {
		cmd.Env = append(cmd.Env, "CONTAINERS_REGISTRIES_CONF="+r.registriesConf)
	}
	out, err := cmd.CombinedOutput()
	// A failed init container fails kube play; for a kubelet it is how the
	// pod ran, which Wait and Results report.
	if err != nil && !initContainerFailed.Match(out) {
		return fmt.Errorf("podman kube play: %w: %s", err, out)
	}
	return nil
}

var initContainerFailed = regexp.MustCompile(`(?m)^Error: init container \S+ exited with code [1-9]`)

// ContainerResult is how one container ended.
type ContainerResult struct {
	Name               string
	ExitCode           int
	Logs               string
	TerminationMessage string
	// Ran is true for containers that ran and exited; false for those still
	// running (Running) and those that never started (after a failed init
	// container).
	Ran     bool
	Running bool
	// Restarting is set by a caller starting the exited container again
	// (see Restart): a kubelet reports it waiting in CrashLoopBackOff.
	// Restarts counts the times it was started again.
	Restarting bool
	Restarts   int
	// Error is podman's own error for the container (failed to start, say).
	Error string
	// Ready is the result of a running container's readiness probe, and
	// ProbeOutput what the probe printed.
	Ready       bool
	ProbeOutput string
	// StartedAt and FinishedAt are zero until the container started or
	// ended.
	StartedAt, FinishedAt time.Time
}

// Wait waits until every container of the pod has exited or timeout passes,
// and returns the results of init containers and containers, in pod order.
func (r *Run) Wait(ctx context.Context, timeout time.Duration) ([]ContainerResult, error) {
	var results []ContainerResult
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var running bool
		results, running = r.results()
		return !running, nil
	})
	if wait.Interrupted(err) {
		err = fmt.Errorf("pod %s still running after %s", r.Pod.Name, timeout)
	}
	return results, err
}

// Results returns how the pod's containers are doing now.
func (r *Run) Results() []ContainerResult {
	results, _ := r.results()
	return results
}

func (r *Run) results() ([]ContainerResult, bool) {
	all := append(append([]corev1.Container{}, r.Pod.Spec.InitContainers...), r.Pod.Spec.Containers...)
	var results []ContainerResult
	running := false
	for _, c := range all {
		res := ContainerResult{Name: c.Name}
		name := r.Pod.Name + "-" + c.Name
		state, err := podman("inspect", "--format", `{{.State.Status}} {{.State.ExitCode}} {{.State.StartedAt.Format "2006-01-02T15:04:05.999999999Z07:00"}} {{.State.FinishedAt.Format "2006-01-02T15:04:05.999999999Z07:00"}} {{.State.Error}}`, name)
		if err == nil {
			fields := strings.Fields(state)
			res.StartedAt, _ = time.Parse(time.RFC3339Nano, fields[2])
			res.FinishedAt, _ = time.Parse(time.RFC3339Nano, fields[3])
			res.Error = strings.Join(fields[4:], " ")
			switch fields[0] {
			case "running", "created", "configured", "initialized":
				res.Running = fields[0] == "running"
				running = running || res.Running
			default:
				res.Ran = true
				res.ExitCode, _ = strconv.Atoi(fields[1])
			}
			// Both streams, as a kubelet keeps them.
			res.Logs, _ = r.Logs(c.Name)
			if res.Running {
				res.Ready, res.ProbeOutput = r.probe(context.Background(), c)
			}
		}
		msg, _ := os.ReadFile(r.termLogs[c.Name])
		res.TerminationMessage = string(msg)
		results = append(results, res)
	}
	return results, running
}

// Restart starts container again after it exited, as a kubelet does under
// the pod's restart policy (the pod runs under Never here, see Play).
func (r *Run) Restart(container string) error {
	_, err := podman("start", r.Pod.Name+"-"+container)
	return err
}

// Logs is container's log so far, what it wrote to stdout and stderr.
func (r *Run) Logs(container string) (string, error) {
	out, err := Command(context.Background(), "logs", r.Pod.Name+"-"+container).CombinedOutput()
	return string(out), err
}

// WaitForLog waits until container's log contains text, for containers that
// keep running (services), and returns the log.
func (r *Run) WaitForLog(ctx context.Context, container, text string, timeout time.Duration) (string, error) {
	var logs string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		logs, _ = r.Logs(container)
		return strings.Contains(logs, text), nil
	})
	if wait.Interrupted(err) {
		err = fmt.Errorf("container %s did not log %q within %s", container, text, timeout)
	}
	return logs, err
}

// Remove removes the pod, its containers and the volumes Adapt created.
func (r *Run) Remove() error {
	var errs []error
	// Remove is the end of a test or demo, not a pod's deletion (Delete runs
	// preStop and the grace period): kill at once.
	if _, err := podman("pod", "rm", "--force", "--time", "0", "--ignore", r.Pod.Name); err != nil {
		errs = append(errs, err)
	}
	for _, v := range r.volumes {
		if _, err := podman("volume", "rm", "--force", v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Check says whether podman and the base image are ready, and what to run
// when they are not.
func Check(baseImage string) error {
	if _, err := exec.LookPath("podman"); err != nil {
		return errors.New("podman not found: run `make base-image` (it installs podman, runc, catatonit and debootstrap)")
	}
	if _, err := podman("image", "exists", baseImage); err != nil {
		return fmt.Errorf("image %s missing: run `make base-image`", baseImage)
	}
	return nil
}

func podman(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := Command(context.Background(), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// Command is a podman command using the project's containers.conf (see it
// for why) unless the caller chose one with CONTAINERS_CONF.
func Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = os.Environ()
	if os.Getenv("CONTAINERS_CONF") == "" {
		_, file, _, _ := runtime.Caller(0)
		cmd.Env = append(cmd.Env, "CONTAINERS_CONF="+filepath.Join(filepath.Dir(file), "..", "e2e", "containers.conf"))
	}
	return cmd
}

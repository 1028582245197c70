// Package sandbox runs a user's BOSH deployment on this machine, given only
// its manifest, ops files and release tarballs (`make demo MANIFEST=…
// RELEASES=…`): it builds the release images with `bosh-injector
// release-image` into the registry of the walkthrough's local cluster of one
// real node (test/cluster) with the chart installed, applies what
// `bosh-injector objects` prints for the manifest and reports per instance,
// as the kubelet reports it, whether it was injected, rendered and runs its
// processes, or the failure with its message; then runs the errands with
// `bosh-injector run-errand`. With Keep it stays up in the
// background for kubectl until Down.
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/configserver/generate"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// Config is one sandbox.
type Config struct {
	// Out receives the narration and the report.
	Out io.Writer
	// Binary is the bosh-injector binary: release-image and objects.
	Binary string
	// Manifest, OpsFiles and Releases (tarballs, source or compiled) are
	// the user's deployment.
	Manifest string
	OpsFiles []string
	Releases []string
	// Vars ("NAME=VALUE") and VarsFiles are variables the user gives, as
	// with bosh's -v and -l: each becomes the variable's Secret, which
	// gathering uses as it is.
	Vars      []string
	VarsFiles []string
	// StemcellImage is the image release-image builds and compiles on (a
	// release-image --stemcell-image); the base image when empty.
	StemcellImage string
	// StandIns are release-image --stand-in PACKAGE=DIR, for vendored
	// packages of release directories.
	StandIns []string
	// Dir holds the sandbox's work files; it must exist and is removed
	// when the sandbox stops.
	Dir string
	// Timeout bounds the wait for gathering and for the instances to
	// settle before the report.
	Timeout time.Duration
	// Ready, when set, is called once the report is out, with the state
	// that Down needs; Run then keeps everything up until ctx ends.
	Ready func(State) error
	// Nodes and Zones shape the cluster (cluster.Options). Without zones
	// each AZ's placement is the scheduler's (`objects
	// --no-zone-affinity`); with them each AZ runs in the zone of its name.
	Nodes int
	Zones []string
}

// State is what a kept sandbox leaves for Down and for the user.
type State struct {
	// Pid is the process holding the sandbox.
	Pid int
	Dir string
	// ClusterDir is the directory of the sandbox's cluster.
	ClusterDir string
	Kubeconfig string
	Namespace  string
	Ready      bool
	// StartTime tells Pid's process from a later one with its pid.
	StartTime string
}

// Sandbox is a running sandbox.
type Sandbox struct {
	cfg       Config
	dir       string
	w         *walkthrough.Walkthrough
	client    client.Client
	namespace string
	// gatherFailure is the director-format message of a failed first
	// gathering: no instance can be injected before one succeeds.
	gatherFailure string
	// manifest is the deployment's manifest Secret.
	manifest string
	// launchers asks a pod's launchers for their status, as `instances`
	// does.
	launchers func(context.Context, *corev1.Pod) (*contract.Status, error)
}

// Run runs the sandbox: up, the report, then (with cfg.Ready) up until ctx
// ends, and down again.
func Run(ctx context.Context, cfg Config) (err error) {
	fixtures.PodmanEnv()
	// The control plane's clients log through controller-runtime; the
	// narration says what matters.
	ctrllog.SetLogger(logr.Discard())
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	s := &Sandbox{cfg: cfg, dir: cfg.Dir}
	defer func() {
		if serr := s.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := s.up(ctx); err != nil {
		return err
	}
	if cfg.Ready == nil {
		return nil
	}
	if err := cfg.Ready(s.state()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// state is the sandbox's, once it is ready.
func (s *Sandbox) state() State {
	st := State{Pid: os.Getpid(), Dir: s.dir, Namespace: s.namespace, Ready: true}
	if s.w != nil {
		st.Kubeconfig, st.ClusterDir = s.w.Kubeconfig, s.w.Cluster.Dir
	}
	return st
}

func (s *Sandbox) up(ctx context.Context) error {
	out := s.cfg.Out
	data, err := os.ReadFile(s.cfg.Manifest)
	if err != nil {
		return err
	}
	var head struct{ Name string }
	if err := yaml.Unmarshal(data, &head); err != nil || head.Name == "" {
		return fmt.Errorf("%s: not a deployment manifest with a name (%v)", s.cfg.Manifest, err)
	}
	s.namespace = names.DNS1123Label(head.Name)
	fmt.Fprintf(out, "A sandbox for deployment %s (%s), in namespace %s.\n", head.Name, s.cfg.Manifest, s.namespace)

	// The manifest's variables, read once: the config server keeps as
	// many keys ready as they take, and the user's values get their types.
	doc, err := s.document(ctx, s.cfg.OpsFiles)
	if err != nil {
		return err
	}
	defs, err := manifest.VariablesOf(doc)
	if err != nil {
		return err
	}
	keys := 0
	for _, d := range defs {
		if generate.TakesKey(d.Type) {
			keys++
		}
	}
	if s.w, err = walkthrough.Start(ctx, walkthrough.Options{Out: out, Dir: s.dir, Nodes: s.cfg.Nodes, Zones: s.cfg.Zones, SpareKeys: keys}); err != nil {
		return err
	}
	s.client = s.w.Client
	s.launchers = func(ctx context.Context, pod *corev1.Pod) (*contract.Status, error) {
		return day2.LauncherStatus(ctx, s.w.UserCluster, pod)
	}
	s.w.Step("The release images, built with `bosh-injector release-image --manifest` from %s", strings.Join(s.cfg.Releases, ", "))
	imagesOps, err := s.buildImages(ctx)
	if err != nil {
		return err
	}

	ops := append(append([]string{}, s.cfg.OpsFiles...), imagesOps)
	objs, err := s.objects(ctx, ops)
	if err != nil {
		return err
	}
	if err := s.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}}); err != nil {
		return err
	}
	if err := s.variables(ctx, head.Name, defs); err != nil {
		return err
	}
	if err := s.apply(ctx, objs[:1]); err != nil {
		return err
	}
	s.manifest = objs[0].GetName()
	gst, err := s.gathered(ctx, s.manifest)
	if err != nil {
		return err
	}
	s.w.Say("%s: %s", names.AnnotationStatus, gst.State)
	if gst.Message != "" {
		s.w.Say("%s", gst.Message)
	}
	if gst.State == status.ReasonGatherFailed {
		s.gatherFailure = gst.Message
	}
	s.w.Step("The StatefulSets and Jobs, applied")
	if err := s.apply(ctx, objs[1:]); err != nil {
		return err
	}
	ws := workloads(objs)
	var reports []instanceReport
	// An observation failing while waiting is tried again: near the
	// timeout the client's rate limiter refuses to wait past it, and
	// instances still starting then must be reported, not end the sandbox.
	// The last observation returns a lasting error.
	_ = wait.PollUntilContextTimeout(ctx, time.Second, s.cfg.Timeout, true, func(ctx context.Context) (bool, error) {
		r, err := s.observe(ctx, ws, false)
		return err == nil && allSettled(r), nil
	})
	if reports, err = s.observe(ctx, ws, true); err != nil {
		return err
	}
	s.w.Step("The instances of deployment %s", head.Name)
	printReport(out, reports)
	return s.runErrands(ctx, head.Name, ops, reports)
}

// document is the manifest with the ops files applied.
func (s *Sandbox) document(ctx context.Context, ops []string) (any, error) {
	files, err := deployment.ReadOpsFiles(ctx, ops)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.cfg.Manifest)
	if err != nil {
		return nil, err
	}
	return deployment.Document(data, files)
}

// runErrands runs the manifest's errand groups with `bosh-injector
// run-errand` once the deployment is up, as one runs `bosh run-errand`
// after `bosh deploy` succeeded, and prints their output and exit status.
func (s *Sandbox) runErrands(ctx context.Context, name string, ops []string, reports []instanceReport) error {
	doc, err := s.document(ctx, ops)
	if err != nil {
		return err
	}
	m, err := manifest.FromDocument(doc)
	if err != nil {
		return err
	}
	for _, g := range m.InstanceGroups {
		if g.Lifecycle != "errand" {
			continue
		}
		args := []string{"run-errand", name, g.Name, "--namespace", s.namespace, "--kubeconfig", s.w.Kubeconfig}
		s.w.Step("Errand %s: `bosh-injector %s`", g.Name, strings.Join(args[:5], " "))
		if n := running(reports); s.gatherFailure != "" || n < len(reports) {
			s.w.Say("not run: the deployment is not up (%d of %d instances running); a director runs errands after a successful deploy", n, len(reports))
			continue
		}
		cmd := exec.CommandContext(ctx, s.cfg.Binary, args...)
		var output bytes.Buffer
		cmd.Stdout, cmd.Stderr = &output, &output
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return fmt.Errorf("bosh-injector run-errand: %w", err)
		}
		s.w.Say("%s", output.String())
		s.w.Say("exit status %d", cmd.ProcessState.ExitCode())
	}
	return nil
}

// objects runs `bosh-injector objects` for the manifest and ops files and
// returns its objects in apply order, the manifest Secret first.
func (s *Sandbox) objects(ctx context.Context, ops []string) ([]*unstructured.Unstructured, error) {
	args := []string{"objects", "--manifest", s.cfg.Manifest, "--namespace", s.namespace}
	if len(s.cfg.Zones) == 0 {
		args = append(args, "--no-zone-affinity")
	} else {
		// Warns of an AZ no node's zone is.
		args = append(args, "--kubeconfig", s.w.Kubeconfig)
	}
	for _, o := range ops {
		args = append(args, "--ops-file", o)
	}
	s.w.Step("`bosh-injector %s`, applied as `kubectl apply -f -` would", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, s.cfg.Binary, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if stderr.Len() > 0 {
		s.w.Say("%s", stderr.String())
	}
	if err != nil {
		return nil, fmt.Errorf("bosh-injector objects: %w", err)
	}
	var objs []*unstructured.Unstructured
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("bosh-injector objects' output: %w", err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, &o)
		}
	}
	if len(objs) == 0 || objs[0].GetKind() != "Secret" {
		return nil, errors.New("bosh-injector objects printed no manifest Secret first")
	}
	return objs, nil
}

// apply creates objs as `kubectl apply` creates them: each with its
// last-applied configuration, so that a later `bosh-injector objects … |
// kubectl apply -f -` removes what it no longer has (an ops file's key of
// the manifest Secret) instead of keeping it.
func (s *Sandbox) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		applied, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		annotations := o.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[corev1.LastAppliedConfigAnnotation] = string(applied)
		o.SetAnnotations(annotations)
		if err := s.client.Create(ctx, o); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		s.w.Say("%s %s created", strings.ToLower(o.GetKind()), o.GetName())
	}
	return nil
}

// variables creates the Secret of each variable the user gave (Vars,
// VarsFiles), labelled with the deployment as README's "To provide a
// variable yourself" says, before the manifest is applied: gathering then
// uses it as it is, as a director takes -v and -l values. defs are the
// manifest's variables.
func (s *Sandbox) variables(ctx context.Context, deploymentName string, defs []manifest.Variable) error {
	if len(s.cfg.Vars)+len(s.cfg.VarsFiles) == 0 {
		return nil
	}
	given, err := variables.Given(ctx, s.cfg.VarsFiles, s.cfg.Vars)
	if err != nil {
		return err
	}
	// As `credhub set` puts them: of the type the manifest declares (the
	// config server keeps a credential's type), else a string is a value,
	// anything else json.
	declared := map[string]string{}
	for _, d := range defs {
		declared[d.Name] = d.Type
	}
	creds := &store.Store{Client: s.client, Namespace: walkthrough.Namespace}
	vals := given.Values()
	for _, name := range vals.Keys() {
		v, _ := vals.Get(name)
		value, err := json.Marshal(v)
		if err != nil {
			return err
		}
		typ := declared[name]
		if _, ok := v.(string); typ == "" && ok {
			typ = "value"
		} else if typ == "" {
			typ = "json"
		}
		full := director.Name(walkthrough.DirectorName, deploymentName, name)
		if _, err := creds.Write(ctx, full, func(*store.Version) (*store.Version, error) {
			return &store.Version{Type: typ, Value: value}, nil
		}); err != nil {
			return fmt.Errorf("variable '%s': %w", name, err)
		}
		s.w.Say("variable %s given: %s on the config server", name, full)
	}
	return nil
}

// gathered waits until the gathering of the manifest Secret ended.
func (s *Sandbox) gathered(ctx context.Context, secret string) (status.Gathering, error) {
	s.w.Step("The job runner gathers the deployment; the kubelet runs its Job's pod")
	var gst status.Gathering
	err := wait.PollUntilContextTimeout(ctx, time.Second, s.cfg.Timeout, true, func(ctx context.Context) (bool, error) {
		var sec corev1.Secret
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: secret}, &sec); err != nil {
			return false, err
		}
		gst = status.GatheringOf(&sec)
		return gst.State == status.ReasonGathered || gst.State == status.ReasonGatherFailed, nil
	})
	if wait.Interrupted(err) {
		return gst, fmt.Errorf("gathering did not end within %s (state %q)", s.cfg.Timeout, gst.State)
	}
	return gst, err
}

func allSettled(reports []instanceReport) bool {
	for _, r := range reports {
		if !r.Settled {
			return false
		}
	}
	return true
}

// stop stops the cluster and removes its files.
func (s *Sandbox) stop() error {
	var errs []error
	fmt.Fprintln(s.cfg.Out, "\nStopping the sandbox")
	if s.w != nil {
		errs = append(errs, s.w.Stop())
	}
	return errors.Join(append(errs, os.RemoveAll(s.dir))...)
}

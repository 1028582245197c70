// Package walkthrough runs bosh-injector's whole flow as a user would on a
// cluster, narrating each step: a local cluster of one real node
// (test/cluster) with cert-manager, or the user's; the Helm chart installed
// with helm, its operator and CoreDNS as pods, the webhook called through
// its Service with cert-manager's certificate; a deployment's manifest
// Secret, the gathering Job's pod and the injected instance pods, run by
// the kubelet.
//
// `make demo` narrates it for a newcomer; the end-to-end test runs the same
// steps and checks their results.
package walkthrough

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clientcluster "github.com/bosh-injector/bosh-injector/gather/client/cluster"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/cluster"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/progress"
)

// OperatorImage is the image `make image` builds: render init containers
// and gathering Jobs run it. The Makefile passes its IMAGE, so that two
// checkouts on one machine can each test their own.
var OperatorImage = cmp.Or(os.Getenv("BOSH_INJECTOR_OPERATOR_IMAGE"), "localhost/bosh-injector:dev")

// ChartImage are the chart's values that run OperatorImage.
func ChartImage() []string {
	i := strings.LastIndex(OperatorImage, ":")
	return []string{"--set", "image.repository=" + OperatorImage[:i], "--set", "image.tag=" + OperatorImage[i+1:]}
}

const (
	// Namespace is where the chart and the operator live.
	Namespace = "bosh-injector"
	// Release is the chart's Helm release name.
	Release = "bosh-injector"
	// DirectorName is the chart's configServer.directorName: the
	// embedded config server names deployment D's variables
	// /<DirectorName>/D/<name>.
	DirectorName = "bosh-injector"
	// BaseImage is the debootstrapped Debian `make base-image` imports.
	BaseImage = "docker.io/library/debian:bookworm-slim"
)

// Options configure a walkthrough.
type Options struct {
	// Out receives the narration.
	Out io.Writer
	// Dir holds work files (helm's); it must exist.
	Dir string
	// Kubeconfig, when set, points the walkthrough at the user's cluster
	// with cert-manager: the chart's operator runs there, from
	// <Registry>/bosh-injector:dev. Without it the walkthrough starts a
	// local cluster.
	Kubeconfig string
	Registry   string
	// Keep leaves the local cluster running (until cluster.Down), or the
	// user's cluster's objects in place, when the walkthrough stops.
	Keep bool
	// Nodes and Zones shape the local cluster (cluster.Options): how many
	// nodes, each one's zone.
	Nodes int
	Zones []string
	// SpareKeys is how many RSA keys each config server replica keeps
	// generated ahead (the chart's configServer.embedded.spareKeys): as
	// many as the deployments to come generate. 0 means FixtureKeys. The
	// chart's default, 128 for cf-deployment's first gathering, would
	// cost a starting cluster half a minute of a core per replica.
	SpareKeys int
}

// FixtureKeys are the RSA keys the fixture deployments generate at most:
// shop's bus CA and certificate.
const FixtureKeys = 2

// Walkthrough is a running local installation of bosh-injector.
type Walkthrough struct {
	// Cluster is the local cluster (test/cluster); nil on the user's.
	Cluster *cluster.Cluster
	Client  client.Client
	// Kubeconfig is an admin kubeconfig for the cluster.
	Kubeconfig string
	// UserCluster reaches the cluster as the client commands do (exec
	// into instances), with Kubeconfig.
	UserCluster clientcluster.Cluster

	opts      Options
	clientset kubernetes.Interface
	installed bool
	// mu guards what tests running in parallel on one walkthrough share.
	mu         sync.Mutex
	step       int
	began      time.Time
	namespaces []string
}

// BinaryEnv names the bosh-injector binary `make test` built before the
// tests ran, which BuildBinary then places instead of building one: no
// compile competes with the clusters.
const BinaryEnv = "BOSH_INJECTOR_BINARY"

// BuildBinary builds bin/bosh-injector from this repository into dir, for
// the walkthrough's operator, and returns its path; with BinaryEnv set, it
// links (or copies) that one there.
func BuildBinary(dir string) (string, error) {
	binary := filepath.Join(dir, "bosh-injector")
	if built := os.Getenv(BinaryEnv); built != "" {
		// As go build -o would, the directory is made.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.Link(built, binary); err == nil {
			return binary, nil
		}
		data, err := os.ReadFile(built)
		if err != nil {
			return "", fmt.Errorf("%s: %w", BinaryEnv, err)
		}
		return binary, os.WriteFile(binary, data, 0o755)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-o", binary, "./cmd/bosh-injector")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building bosh-injector: %w: %s", err, out)
	}
	return binary, nil
}

// Start starts a local cluster with cert-manager (or connects to the
// user's) and installs the chart, whose operator serves the webhook with
// the certificate cert-manager issued. Stop undoes it, also after a failed
// start.
func Start(ctx context.Context, opts Options) (*Walkthrough, error) {
	w := &Walkthrough{opts: opts}
	if opts.Kubeconfig != "" {
		w.Step("Your cluster, from %s", w.opts.Kubeconfig)
		return w, w.startOnCluster(ctx)
	}
	return w, w.startLocalCluster(ctx)
}

// startLocalCluster starts a cluster of real nodes (one by default) on this machine
// (test/cluster), pushes the operator image `make image` built to its
// registry and installs the chart there as on any cluster.
func (w *Walkthrough) startLocalCluster(ctx context.Context) error {
	if err := fixtures.Podman(ctx, "image", "exists", OperatorImage).Run(); err != nil {
		return fmt.Errorf("image %s missing: run `make image`", OperatorImage)
	}
	size := "one node"
	if n := max(w.opts.Nodes, len(w.opts.Zones)); n > 1 {
		size = fmt.Sprintf("%d nodes (zones %s)", n, strings.Join(w.opts.Zones, ","))
	}
	w.Step("A local Kubernetes cluster of %s, every part built from source by `make testbin`: etcd, kube-apiserver, "+
		"kube-controller-manager, kube-scheduler; each node's kubelet, containerd v2 (Debian's runc and CNI plugins) and kube-proxy; "+
		"CoreDNS as the cluster DNS; an image registry; cert-manager's controller and cainjector", size)
	c, err := cluster.Start(ctx, cluster.Options{Keep: w.opts.Keep, Log: sayer{w}, CertManager: true, Nodes: w.opts.Nodes, Zones: w.opts.Zones})
	if err != nil {
		return err
	}
	w.Cluster = c
	w.opts.Kubeconfig, w.opts.Registry = c.Kubeconfig, c.Registry
	w.Kubeconfig = c.Kubeconfig
	nodes, err := w.Kubectl(ctx, "get", "nodes", "-o", "wide", "-L", corev1.LabelTopologyZone)
	if err != nil {
		return err
	}
	w.Say("%s", nodes)
	ref := c.Registry + "/bosh-injector:dev"
	w.Say("pushing %s to the cluster's registry as %s", OperatorImage, ref)
	if err := fixtures.PushImage(ctx, OperatorImage, ref); err != nil {
		return err
	}
	i := strings.LastIndex(c.CoreDNSImage, ":")
	values := []string{"--set", "dns.image.repository=" + c.CoreDNSImage[:i], "--set", "dns.image.tag=" + c.CoreDNSImage[i+1:]}
	if len(c.Nodes) > 1 {
		// The operator on the first node, with the cluster's own pods:
		// the others are there to be drained and lost.
		values = append(values, "--set-json", fmt.Sprintf(`nodeSelector={%q:%q}`, corev1.LabelHostname, c.NodeName))
	}
	return w.startOnCluster(ctx, values...)
}

// sayer narrates each line written to it.
type sayer struct{ w *Walkthrough }

func (s sayer) Write(p []byte) (int, error) {
	s.w.Say("%s", p)
	return len(p), nil
}

// Registry is where the cluster pulls images from: the local cluster's
// registry, or the user's prefix.
func (w *Walkthrough) Registry() string { return w.opts.Registry }

// OperatorLogs are the last lines of the operator's logs.
func (w *Walkthrough) OperatorLogs(ctx context.Context) string {
	out, err := w.Kubectl(ctx, "logs", "--namespace", Namespace, "--selector", "app.kubernetes.io/instance="+Release,
		"--all-containers", "--prefix", "--tail", "100")
	if err != nil {
		return err.Error()
	}
	return out
}

// startOnCluster installs the chart on the cluster of opts.Kubeconfig,
// whose kubelets then run the operator and every pod; values are more of
// the chart's.
func (w *Walkthrough) startOnCluster(ctx context.Context, values ...string) error {
	w.Kubeconfig = w.opts.Kubeconfig
	config, err := clientcmd.BuildConfigFromFlags("", w.Kubeconfig)
	if err != nil {
		return err
	}
	if w.Client, err = client.New(config, client.Options{}); err != nil {
		return err
	}
	if w.clientset, err = kubernetes.NewForConfig(config); err != nil {
		return err
	}
	w.UserCluster = clientcluster.Cluster{Config: config, Client: w.Client, Kube: w.clientset}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := w.Client.Get(ctx, client.ObjectKey{Name: "certificates.cert-manager.io"}, crd); err != nil {
		return fmt.Errorf("cert-manager's Certificate CRD: %w (install cert-manager first: https://cert-manager.io/docs/installation/)", err)
	}
	w.Say("apiserver %s, cert-manager installed", config.Host)
	spare := cmp.Or(w.opts.SpareKeys, FixtureKeys)
	if err := w.installChart(ctx, append(append([]string{"--set", "image.repository=" + w.opts.Registry + "/bosh-injector", "--set", "image.tag=dev",
		"--set", fmt.Sprintf("configServer.embedded.spareKeys=%d", spare), "--wait", "--timeout", "5m"}, clientValues()...), values...)...); err != nil {
		return err
	}
	if err := w.createClient(ctx); err != nil {
		return err
	}
	if _, _, err := w.waitForCertificate(ctx); err != nil {
		return err
	}
	pods, err := w.Kubectl(ctx, "get", "pods", "--namespace", Namespace, "-o", "wide")
	if err != nil {
		return err
	}
	w.Say("%s", pods)
	w.Say("the operator runs in Deployment %s/%s (webhook on every replica, the job runner on the elected one)", Namespace, Release)
	w.Step("`helm test`: the chart's test pod asks the webhook, through its Service, to admit a pod of a deployment never gathered")
	out, err := w.Helm(ctx, "test", Release, "--namespace", Namespace, "--timeout", "2m")
	if err != nil {
		return err
	}
	w.Say("%s", strings.TrimSpace(out))
	return nil
}

// installChart installs charts/bosh-injector with helm and lists its
// objects.
func (w *Walkthrough) installChart(ctx context.Context, set ...string) error {
	w.Step("The Helm chart charts/bosh-injector, installed into namespace %s", Namespace)
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := w.Helm(ctx, append([]string{"install", Release, filepath.Join(root, "charts", "bosh-injector"), "--namespace", Namespace, "--create-namespace"}, set...)...); err != nil {
		return err
	}
	w.installed = true
	manifest, err := w.Helm(ctx, "get", "manifest", Release, "--namespace", Namespace)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(manifest, "\n---") {
		var obj metav1.PartialObjectMetadata
		if yaml.Unmarshal([]byte(doc), &obj) == nil && obj.Kind != "" {
			w.Say("%s %s", obj.Kind, obj.Name)
		}
	}
	return nil
}

// waitForCertificate waits until cert-manager issued the serving
// certificate and cainjector put its CA into the webhook configuration.
func (w *Walkthrough) waitForCertificate(ctx context.Context) (*corev1.Secret, *admissionregistrationv1.MutatingWebhookConfiguration, error) {
	w.Step("cert-manager issues the webhook's serving certificate; cainjector puts its CA into the MutatingWebhookConfiguration")
	var serving corev1.Secret
	if err := w.poll(ctx, time.Minute, "the serving certificate Secret", func() (bool, error) {
		err := w.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Release + "-serving-cert"}, &serving)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return nil, nil, err
	}
	var hook admissionregistrationv1.MutatingWebhookConfiguration
	if err := w.poll(ctx, time.Minute, "the webhook's CA bundle", func() (bool, error) {
		err := w.Client.Get(ctx, client.ObjectKey{Name: Release}, &hook)
		return err == nil && len(hook.Webhooks) > 0 && string(hook.Webhooks[0].ClientConfig.CABundle) == string(serving.Data["ca.crt"]), client.IgnoreNotFound(err)
	}); err != nil {
		return nil, nil, err
	}
	w.Say("Secret %s/%s holds the certificate; the webhook %s trusts its CA", Namespace, serving.Name, hook.Name)
	return &serving, &hook, nil
}

// Deploy applies a deployment's manifest Secret (made by apply) in namespace
// ns, runs the gathering Job's pod the job runner creates and returns the
// manifest Secret's status once gathering ended.
func (w *Walkthrough) Deploy(ctx context.Context, ns string, apply func(context.Context, client.Client, string) (*corev1.Secret, error)) (status.Gathering, error) {
	w.Step("The deployment manifest, as a Secret labelled %s in namespace %s", names.LabelDeployment, ns)
	if err := w.ensureNamespace(ctx, ns); err != nil {
		return status.Gathering{}, err
	}
	gatherings := client.MatchingLabels{status.LabelComponent: status.ComponentGather}
	earlier, err := w.podNames(ctx, ns, gatherings)
	if err != nil {
		return status.Gathering{}, err
	}
	manifest, err := apply(ctx, w.Client, ns)
	if err != nil {
		return status.Gathering{}, err
	}
	w.Say("Secret %s: %s", manifest.Name, strings.Join(slices.Sorted(maps.Keys(manifest.Data)), ", "))

	w.Step("The job runner starts a gathering Job; the kubelet runs its pod")
	var pod corev1.Pod
	if err := w.poll(ctx, time.Minute, "the gathering Job's pod", func() (bool, error) {
		var pods corev1.PodList
		if err := w.Client.List(ctx, &pods, client.InNamespace(ns), gatherings,
			client.MatchingLabels{names.LabelDeployment: names.LabelValue(manifest.Labels[names.LabelDeployment])}); err != nil {
			return false, err
		}
		// The one this manifest started: a kubelet may have run it already.
		for _, p := range pods.Items {
			if !earlier[p.Name] {
				pod = p
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return status.Gathering{}, err
	}
	w.Say("Job %s, pod %s:", pod.Labels[batchv1.JobNameLabel], pod.Name)
	w.describeContainers(&pod)
	run := w.pod(&pod)
	if _, err := run.Wait(ctx, 3*time.Minute); err != nil {
		return status.Gathering{}, err
	}
	if _, err := w.Report(ctx, run); err != nil {
		return status.Gathering{}, err
	}
	w.sayConfinement(ctx, run)

	w.Step("The Job controller sees the pod's status, as the kubelet reported it; the job runner records the outcome on the manifest Secret")
	var gst status.Gathering
	if err := w.poll(ctx, time.Minute, "the gathering's outcome", func() (bool, error) {
		var s corev1.Secret
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(manifest), &s); err != nil {
			return false, err
		}
		gst = status.GatheringOf(&s)
		return gst.Job == pod.Labels[batchv1.JobNameLabel] && (gst.State == status.ReasonGathered || gst.State == status.ReasonGatherFailed), nil
	}); err != nil {
		return gst, err
	}
	w.Say("%s: %s", names.AnnotationStatus, gst.State)
	if gst.Message != "" {
		w.Say("%s", gst.Message)
	}
	var secrets corev1.SecretList
	if err := w.Client.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{names.LabelDeployment}); err != nil {
		return gst, err
	}
	w.Say("Secrets written by gather (values stay in the cluster):")
	for _, s := range secrets.Items {
		if s.Name != manifest.Name {
			w.Say("  %-36s keys: %s", s.Name, strings.Join(slices.Sorted(maps.Keys(s.Data)), ", "))
		}
	}
	return gst, nil
}

// podNames are the names of the pods in ns with labels.
func (w *Walkthrough) podNames(ctx context.Context, ns string, labels client.MatchingLabels) (map[string]bool, error) {
	var pods corev1.PodList
	if err := w.Client.List(ctx, &pods, client.InNamespace(ns), labels); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		out[p.Name] = true
	}
	return out, nil
}

// sayConfinement narrates whether the gathering's templates rendered
// without its API token, from the gather container's log.
func (w *Walkthrough) sayConfinement(ctx context.Context, run *Pod) {
	logs, _ := run.Logs(ctx, "gather")
	for _, line := range strings.Split(logs, "\n") {
		for _, said := range []string{ruby.Confined, ruby.Unconfined} {
			if strings.Contains(line, said) {
				w.Say("gather: %s", said)
			}
		}
	}
}

// Instance is one instance of an instance group, as StartInstance runs it.
type Instance struct {
	// Deployment is "shop" when empty.
	Deployment string
	Group      string
	AZIndex    int
	// Container and Image: a container named for the group's first BPM
	// process, which the webhook completes.
	Container, Image string
	// Disk, for groups with a persistent disk, is the size of the
	// volumeClaimTemplate named store.
	Disk string
	// ReleaseJobs, when set, is the pod template's release-jobs
	// annotation: image volumes or copies, whatever the operator picked.
	ReleaseJobs inject.ReleaseJobs
}

// releaseJobs is the pod template's annotations choosing r, if set.
func releaseJobs(r inject.ReleaseJobs) map[string]string {
	if r == "" {
		return nil
	}
	return map[string]string{names.AnnotationReleaseJobs: string(r)}
}

// StartInstance creates a StatefulSet of one instance in namespace ns,
// labelled for bosh-injector, and runs the injected pod the apiserver
// stored.
func (w *Walkthrough) StartInstance(ctx context.Context, ns string, in Instance) (*Pod, error) {
	name := fmt.Sprintf("%s-z%d", in.Group, in.AZIndex)
	w.Step("A plain StatefulSet %s, its pod template labelled with deployment, instance group and AZ", name)
	deployment := cmp.Or(in.Deployment, "shop")
	labels := map[string]string{names.LabelDeployment: deployment, names.LabelInstanceGroup: in.Group, names.LabelAZIndex: strconv.Itoa(in.AZIndex)}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: releaseJobs(in.ReleaseJobs)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: in.Container, Image: in.Image}}}}},
	}
	if in.Disk != "" {
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: inject.VolumeStore},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(in.Disk)}}}}}
		w.Say("with a volumeClaimTemplate %s of %s for the group's persistent disk", inject.VolumeStore, in.Disk)
	}
	if err := w.Client.Create(ctx, sts); err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := w.poll(ctx, time.Minute, "the StatefulSet's pod", func() (bool, error) {
		err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-0"}, &pod)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return nil, err
	}
	if _, ok := pod.Annotations[names.AnnotationInjected]; !ok {
		return nil, fmt.Errorf("pod %s was not injected", pod.Name)
	}
	w.Step("The webhook injected pod %s at creation; as the apiserver stored it:", pod.Name)
	w.describeContainers(&pod)
	for _, v := range pod.Spec.Volumes {
		w.Say("  volume %-22s %s", v.Name, volumeKind(v))
	}
	w.Step("The kubelet runs pod %s: copy, render, then the BPM processes", pod.Name)
	return w.pod(&pod), nil
}

// Report narrates how the pod's containers are doing now, as the kubelet
// reports them, and returns that with each container's log.
func (w *Walkthrough) Report(ctx context.Context, p *Pod) ([]cluster.Container, error) {
	results, err := p.Containers(ctx)
	if err != nil {
		return nil, err
	}
	w.sayResults(results)
	return results, nil
}

// Events narrates the Events of namespace ns, oldest first.
func (w *Walkthrough) Events(ctx context.Context, ns string) error {
	w.Step("Events in namespace %s", ns)
	var events corev1.EventList
	if err := w.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return err
	}
	slices.SortStableFunc(events.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	for _, e := range events.Items {
		w.Say("  %-7s %-14s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
	return nil
}

func eventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.LastTimestamp.Time
}

// Stop removes the pods it ran, stops the operator and the control plane
// and removes their files.
func (w *Walkthrough) Stop() error {
	var errs []error
	if w.Cluster == nil && !w.opts.Keep {
		// A real cluster: remove what the walkthrough created there.
		for _, ns := range w.namespaces {
			errs = append(errs, client.IgnoreNotFound(w.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
		}
		if w.installed {
			_, err := w.Helm(context.Background(), "uninstall", Release, "--namespace", Namespace)
			errs = append(errs, err)
		}
	}
	if w.Cluster != nil {
		// A kept cluster stays up for `make demo-down`.
		errs = append(errs, w.Cluster.Stop())
	}
	return errors.Join(errs...)
}

// Helm runs the helm `make testbin` built against the cluster and returns
// its stdout.
func (w *Walkthrough) Helm(ctx context.Context, args ...string) (string, error) {
	home := filepath.Join(w.opts.Dir, "helm")
	return w.tool(ctx, "helm", args, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
}

// Kubectl runs the kubectl `make testbin` built against the cluster and
// returns its stdout.
func (w *Walkthrough) Kubectl(ctx context.Context, args ...string) (string, error) {
	return w.tool(ctx, "kubectl", args)
}

func (w *Walkthrough) tool(ctx context.Context, name string, args []string, env ...string) (string, error) {
	bin, err := controlplane.BinDir()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+w.Kubeconfig), env...)
	out, err := cmd.Output()
	if exit, ok := err.(*exec.ExitError); ok {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, exit.Stderr)
	}
	return string(out), err
}

// Step starts a numbered step of the narration.
func (w *Walkthrough) Step(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.began.IsZero() {
		w.began = time.Now()
	}
	w.step++
	fmt.Fprintf(w.opts.Out, "\n%d. [%5.1fs] %s\n", w.step, time.Since(w.began).Seconds(), fmt.Sprintf(format, args...))
}

// ensureNamespace creates ns once: a namespace may hold several
// deployments, deployed by tests running in parallel.
func (w *Walkthrough) ensureNamespace(ctx context.Context, ns string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.Contains(w.namespaces, ns) {
		return nil
	}
	if err := w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	w.namespaces = append(w.namespaces, ns)
	return nil
}

// Say narrates a line within a step.
func (w *Walkthrough) Say(format string, args ...any) {
	for _, line := range strings.Split(strings.TrimRight(fmt.Sprintf(format, args...), "\n"), "\n") {
		fmt.Fprintf(w.opts.Out, "   %s\n", line)
	}
}

func (w *Walkthrough) describeContainers(pod *corev1.Pod) {
	for _, c := range pod.Spec.InitContainers {
		w.Say("  init      %-22s %s %s", c.Name, c.Image, strings.Join(append(slices.Clone(c.Command), c.Args...), " "))
	}
	for _, c := range pod.Spec.Containers {
		w.Say("  container %-22s %s %s", c.Name, c.Image, strings.Join(append(slices.Clone(c.Command), c.Args...), " "))
	}
}

func (w *Walkthrough) sayResults(results []cluster.Container) {
	for _, r := range results {
		switch {
		case r.Running:
			w.Say("  %-22s running%s", r.Name, yes(r.Ready, ", ready", ""))
		case !r.Ran:
			w.Say("  %-22s waiting %s", r.Name, r.Waiting)
		default:
			w.Say("  %-22s exited %d%s", r.Name, r.ExitCode, yes(r.Restarting, fmt.Sprintf(" (restarted %d times)", r.Restarts), ""))
			if r.ExitCode != 0 && r.TerminationMessage != "" {
				w.Say("  %-22s termination message:", "")
				w.Say("%s", indent(strings.TrimSpace(r.TerminationMessage), 6))
			}
		}
	}
}

func yes(ok bool, y, n string) string {
	if ok {
		return y
	}
	return n
}

func indent(text string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(text, "\n", "\n"+pad)
}

// Credential is the current value (JSON) of the embedded config server's
// credential name, as the chart installs it; an error when it has none.
func (w *Walkthrough) Credential(ctx context.Context, name string) (string, error) {
	v, err := (&store.Store{Client: w.Client, Namespace: Namespace}).Current(ctx, name)
	if err == nil && v == nil {
		err = fmt.Errorf("the config server has no credential %s", name)
	}
	if err != nil {
		return "", err
	}
	return string(v.Value), nil
}

// Redact replaces the credentials of namespace ns found in text: the
// config server's (in the chart's namespace) by "(<name>)" or
// "(<name>.<key>)", variable Secrets' by "(<secret> <key>)". The
// walkthrough shows rendered files, and credentials stay out of its output.
func (w *Walkthrough) Redact(ctx context.Context, ns, text string) (string, error) {
	replace := func(value, by string) {
		if len(value) >= 8 {
			text = strings.ReplaceAll(text, value, "("+by+")")
		}
	}
	var creds corev1.SecretList
	if err := w.Client.List(ctx, &creds, client.InNamespace(Namespace), client.HasLabels{store.LabelID}); err != nil {
		return "", err
	}
	for _, s := range creds.Items {
		name := s.Annotations[store.AnnotationName]
		var value any
		if err := json.Unmarshal(s.Data[store.KeyValue], &value); err != nil {
			return "", fmt.Errorf("credential %s: %w", name, err)
		}
		switch v := value.(type) {
		case string:
			replace(v, name)
		case map[string]any:
			for k, f := range v {
				if str, ok := f.(string); ok {
					replace(str, name+"."+k)
				}
			}
		}
	}
	var secrets corev1.SecretList
	if err := w.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{names.LabelManagedBy: names.ManagedBy}); err != nil {
		return "", err
	}
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			replace(string(v), s.Name+" "+k)
		}
	}
	return text, nil
}

func volumeKind(v corev1.Volume) string {
	switch {
	case v.Secret != nil:
		return "Secret " + v.Secret.SecretName
	case v.EmptyDir != nil:
		return "emptyDir"
	case v.PersistentVolumeClaim != nil:
		return "PersistentVolumeClaim " + v.PersistentVolumeClaim.ClaimName
	case v.Projected != nil:
		return "projected (service-account token)"
	case v.DownwardAPI != nil:
		return "downwardAPI"
	}
	return "other"
}

// poll calls done until it is true or fails, or the cluster did nothing for
// timeout (package progress): a loaded machine slows the walkthrough down
// rather than failing it.
func (w *Walkthrough) poll(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	return progress.Until(ctx, w.Client, what, timeout, done)
}

// Status is the job runner's status on manifest Secret name in ns.
func (w *Walkthrough) Status(ctx context.Context, ns, name string) (status.Gathering, error) {
	var s corev1.Secret
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return status.Gathering{}, err
	}
	return status.GatheringOf(&s), nil
}

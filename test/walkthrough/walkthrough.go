// Package walkthrough runs bosh-injector's whole flow on this machine, as a
// user would on a cluster, narrating each step: a local control plane with
// cert-manager, the Helm chart's objects, the operator from the built binary
// serving the webhook with cert-manager's certificate, a deployment's manifest
// Secret, the gathering Job's pod and the injected instance pods running with
// real containers under podman (the kubelet's part, see test/podman).
//
// `make demo` narrates it for a newcomer; the end-to-end test runs the same
// steps and checks their results.
package walkthrough

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/ruby"
	"github.com/bosh-injector/bosh-injector/gather/runner"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/podman"
	"github.com/bosh-injector/bosh-injector/webhook"
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
	// BaseImage is the debootstrapped Debian `make base-image` imports.
	BaseImage = "docker.io/library/debian:bookworm-slim"
)

// Options configure a walkthrough.
type Options struct {
	// Out receives the narration.
	Out io.Writer
	// Binary is the bosh-injector binary the operator runs from.
	Binary string
	// Dir holds work files (logs, kubeconfigs, pod files); it must exist.
	Dir string
	// Kubeconfig, when set, points the walkthrough at a real cluster with
	// cert-manager: the chart's operator runs there, from
	// <Registry>/bosh-injector:dev, and the cluster's kubelets run the pods.
	Kubeconfig string
	Registry   string
	// Keep leaves the cluster's objects in place when the walkthrough stops.
	Keep bool
	// RegistriesConf is the local node's registries.conf, telling it how to
	// pull from a registry started for the run (see test/registry).
	RegistriesConf string
}

// Walkthrough is a running local installation of bosh-injector.
type Walkthrough struct {
	// CP is the local control plane; nil on a real cluster.
	CP     *controlplane.ControlPlane
	Client client.Client
	// Kubeconfig is an admin kubeconfig for the control plane.
	Kubeconfig string
	// OperatorLog is the operator's log file.
	OperatorLog string

	opts       Options
	step       int
	began      time.Time
	node       node
	operator   *exec.Cmd
	exited     chan error
	namespaces []string
	installed  bool
	network    *podman.Network
	dns        *podDNS
}

// BuildBinary builds bin/bosh-injector from this repository into dir, for
// the walkthrough's operator, and returns its path.
func BuildBinary(dir string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	binary := filepath.Join(dir, "bosh-injector")
	build := exec.Command("go", "build", "-o", binary, "./cmd/bosh-injector")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building bosh-injector: %w: %s", err, out)
	}
	return binary, nil
}

// Start starts the control plane with cert-manager, installs the chart and
// runs the operator from opts.Binary, serving the chart's webhook
// configuration with the certificate cert-manager issued. Stop undoes it,
// also after a failed start.
func Start(ctx context.Context, opts Options) (*Walkthrough, error) {
	w := &Walkthrough{opts: opts}
	if opts.Kubeconfig != "" {
		return w, w.startOnCluster(ctx)
	}
	if err := podman.Check(BaseImage); err != nil {
		return w, err
	}
	if err := podman.Command(ctx, "image", "exists", OperatorImage).Run(); err != nil {
		return w, fmt.Errorf("image %s missing: run `make image`", OperatorImage)
	}

	w.Step("A local control plane: etcd, kube-apiserver, kube-controller-manager, cert-manager's controller and cainjector, all built from source by `make testbin`")
	started := time.Now()
	cp, err := controlplane.Start(controlplane.Options{ControllerManager: true, CertManager: true})
	if err != nil {
		return w, err
	}
	w.CP, w.Client = cp, cp.Client
	if w.Kubeconfig, err = cp.KubeconfigFile("walkthrough"); err != nil {
		return w, err
	}
	if w.network, err = podman.CreateNetwork(fmt.Sprintf("walkthrough%d", os.Getpid())); err != nil {
		return w, err
	}
	w.node = &podmanNode{client: cp.Client,
		kubelet: w.Kubelet(filepath.Join(opts.Dir, "pods"), fmt.Sprintf("walkthrough%d-", os.Getpid()))}
	w.Say("apiserver %s, up in %s", cp.Config.Host, time.Since(started).Round(100*time.Millisecond))

	// The serving certificate also names localhost: the apiserver reaches
	// the operator process on this machine, not through the chart's Service.
	if err := w.installChart(ctx, append(ChartImage(), "--set", "certificate.extraDNSNames={localhost}")...); err != nil {
		return w, err
	}
	w.Say("(no kubelet here runs the chart's Deployment: the operator runs from %s instead, with the same certificate)", opts.Binary)
	if w.dns, err = w.startDNS(ctx, w.network); err != nil {
		return w, err
	}
	serving, hook, err := w.waitForCertificate(ctx)
	if err != nil {
		return w, err
	}

	w.Step("The operator: `bosh-injector webhook` (admission webhook and gathering job runner), from the built binary")
	port, err := w.startOperator(ctx, serving)
	if err != nil {
		return w, err
	}
	hook.Webhooks[0].ClientConfig.Service = nil
	hook.Webhooks[0].ClientConfig.URL = ptr.To("https://localhost:" + strconv.Itoa(port) + webhook.Path)
	if err := w.Client.Update(ctx, hook); err != nil {
		return w, err
	}
	w.Say("serving on localhost:%d; the webhook configuration now calls it there (log: %s)", port, w.OperatorLog)
	return w, nil
}

// startOnCluster installs the chart on the cluster of opts.Kubeconfig,
// whose kubelets then run the operator and every pod.
func (w *Walkthrough) startOnCluster(ctx context.Context) error {
	w.Step("Your cluster, from %s", w.opts.Kubeconfig)
	w.Kubeconfig = w.opts.Kubeconfig
	config, err := clientcmd.BuildConfigFromFlags("", w.Kubeconfig)
	if err != nil {
		return err
	}
	if w.Client, err = client.New(config, client.Options{}); err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	w.node = &clusterNode{client: w.Client, clientset: clientset}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := w.Client.Get(ctx, client.ObjectKey{Name: "certificates.cert-manager.io"}, crd); err != nil {
		return fmt.Errorf("cert-manager's Certificate CRD: %w (install cert-manager first: https://cert-manager.io/docs/installation/)", err)
	}
	w.Say("apiserver %s, cert-manager installed", config.Host)
	if err := w.installChart(ctx, "--set", "image.repository="+w.opts.Registry+"/bosh-injector", "--set", "image.tag=dev", "--wait", "--timeout", "5m"); err != nil {
		return err
	}
	if _, _, err := w.waitForCertificate(ctx); err != nil {
		return err
	}
	w.Say("the operator runs in Deployment %s/%s (webhook on every replica, the job runner on the elected one)", Namespace, Release)
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
	if err := poll(ctx, time.Minute, "the serving certificate Secret", func() (bool, error) {
		err := w.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Release + "-serving-cert"}, &serving)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return nil, nil, err
	}
	var hook admissionregistrationv1.MutatingWebhookConfiguration
	if err := poll(ctx, time.Minute, "the webhook's CA bundle", func() (bool, error) {
		err := w.Client.Get(ctx, client.ObjectKey{Name: Release}, &hook)
		return err == nil && len(hook.Webhooks) > 0 && string(hook.Webhooks[0].ClientConfig.CABundle) == string(serving.Data["ca.crt"]), client.IgnoreNotFound(err)
	}); err != nil {
		return nil, nil, err
	}
	w.Say("Secret %s/%s holds the certificate; the webhook %s trusts its CA", Namespace, serving.Name, hook.Name)
	return &serving, &hook, nil
}

// startOperator runs `bosh-injector webhook` with the serving certificate
// and waits until it is ready; it returns the webhook port.
func (w *Walkthrough) startOperator(ctx context.Context, serving *corev1.Secret) (int, error) {
	certDir := filepath.Join(w.opts.Dir, "serving-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return 0, err
	}
	for _, k := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certDir, k), serving.Data[k], 0o600); err != nil {
			return 0, err
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		return 0, err
	}
	w.OperatorLog = filepath.Join(w.opts.Dir, "operator.log")
	logFile, err := os.Create(w.OperatorLog)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	cmd := exec.Command(w.opts.Binary, "webhook", "--kubeconfig="+w.Kubeconfig, "--namespace="+Namespace,
		"--operator-image="+OperatorImage, "--cert-dir="+certDir, "--host=127.0.0.1",
		"--port="+strconv.Itoa(ports[0]), "--health-port="+strconv.Itoa(ports[1]), "--metrics-port=0", "--dns-service="+DNSService)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Dies with this process, as the control plane's children do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	w.operator, w.exited = cmd, make(chan error, 1)
	go func() { w.exited <- cmd.Wait() }()
	ready := "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/readyz"
	err = poll(ctx, 30*time.Second, "the operator's /readyz", func() (bool, error) {
		select {
		case err := <-w.exited:
			w.exited <- err
			return false, fmt.Errorf("the operator exited: %v\n%s", err, tail(w.OperatorLog, 20))
		default:
		}
		resp, err := http.Get(ready)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return ports[0], err
}

// Deploy applies a deployment's manifest Secret (made by apply) in namespace
// ns, runs the gathering Job's pod the job runner creates and returns the
// manifest Secret's status once gathering ended.
func (w *Walkthrough) Deploy(ctx context.Context, ns string, apply func(context.Context, client.Client, string) (*corev1.Secret, error)) (runner.Status, error) {
	w.Step("The deployment manifest, as a Secret labelled %s in namespace %s", names.LabelDeployment, ns)
	// A namespace may hold several deployments.
	if !slices.Contains(w.namespaces, ns) {
		if err := w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return runner.Status{}, err
		}
		w.namespaces = append(w.namespaces, ns)
	}
	manifest, err := apply(ctx, w.Client, ns)
	if err != nil {
		return runner.Status{}, err
	}
	w.Say("Secret %s: %s", manifest.Name, strings.Join(slices.Sorted(maps.Keys(manifest.Data)), ", "))

	w.Step("The job runner starts a gathering Job; its pod runs %s", w.node.where())
	var pod corev1.Pod
	if err := poll(ctx, time.Minute, "the gathering Job's pod", func() (bool, error) {
		var pods corev1.PodList
		err := w.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{runner.LabelComponent: runner.ComponentGather,
			names.LabelDeployment: names.LabelValue(manifest.Labels[names.LabelDeployment])})
		if err != nil {
			return false, err
		}
		// The one not run yet: an earlier gathering's pod has ended.
		for _, p := range pods.Items {
			if p.Status.Phase == "" || p.Status.Phase == corev1.PodPending {
				pod = p
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return runner.Status{}, err
	}
	w.Say("Job %s, pod %s:", pod.Labels[batchv1.JobNameLabel], pod.Name)
	w.describeContainers(&pod)
	run, err := w.node.start(ctx, &pod)
	if err != nil {
		return runner.Status{}, err
	}
	if _, err := run.Wait(ctx, 3*time.Minute); err != nil {
		return runner.Status{}, err
	}
	if _, err := w.Report(ctx, run); err != nil {
		return runner.Status{}, err
	}
	w.sayConfinement(run)

	w.Step("The Job controller sees the pod's reported status; the job runner records the outcome on the manifest Secret")
	var status runner.Status
	if err := poll(ctx, time.Minute, "the gathering's outcome", func() (bool, error) {
		var s corev1.Secret
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(manifest), &s); err != nil {
			return false, err
		}
		status = runner.StatusOf(&s)
		return status.Job == pod.Labels[batchv1.JobNameLabel] && (status.State == runner.ReasonGathered || status.State == runner.ReasonGatherFailed), nil
	}); err != nil {
		return status, err
	}
	w.Say("%s: %s", names.AnnotationStatus, status.State)
	if status.Message != "" {
		w.Say("%s", status.Message)
	}
	var secrets corev1.SecretList
	if err := w.Client.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{names.LabelDeployment}); err != nil {
		return status, err
	}
	w.Say("Secrets written by gather (values stay in the cluster):")
	for _, s := range secrets.Items {
		if s.Name != manifest.Name {
			w.Say("  %-36s keys: %s", s.Name, strings.Join(slices.Sorted(maps.Keys(s.Data)), ", "))
		}
	}
	return status, nil
}

// sayConfinement narrates whether the gathering's templates rendered
// without its API token, from the gather container's log (under podman).
func (w *Walkthrough) sayConfinement(run Pod) {
	r, ok := run.(*podman.Run)
	if !ok {
		return
	}
	logs, _ := r.Logs("gather")
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
}

// StartInstance creates a StatefulSet of one instance in namespace ns,
// labelled for bosh-injector, and runs the injected pod the apiserver
// stored.
func (w *Walkthrough) StartInstance(ctx context.Context, ns string, in Instance) (Pod, error) {
	name := fmt.Sprintf("%s-z%d", in.Group, in.AZIndex)
	w.Step("A plain StatefulSet %s, its pod template labelled with deployment, instance group and AZ", name)
	deployment := cmp.Or(in.Deployment, "shop")
	labels := map[string]string{names.LabelDeployment: deployment, names.LabelInstanceGroup: in.Group, names.LabelAZIndex: strconv.Itoa(in.AZIndex)}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
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
	if err := poll(ctx, time.Minute, "the StatefulSet's pod", func() (bool, error) {
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
	w.Step("Pod %s runs %s: copy, render, then the BPM processes", pod.Name, w.node.where())
	return w.node.start(ctx, &pod)
}

// Report narrates how the pod's containers are doing now; under podman it
// also writes that into the pod's status, as a kubelet would.
func (w *Walkthrough) Report(ctx context.Context, p Pod) ([]podman.ContainerResult, error) {
	results, err := w.node.results(ctx, p)
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
	if w.node != nil {
		errs = append(errs, w.node.stop())
	}
	if w.CP == nil && !w.opts.Keep {
		// A real cluster: remove what the walkthrough created there.
		for _, ns := range w.namespaces {
			errs = append(errs, client.IgnoreNotFound(w.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
		}
		if w.installed {
			_, err := w.Helm(context.Background(), "uninstall", Release, "--namespace", Namespace)
			errs = append(errs, err)
		}
	}
	if w.operator != nil {
		terminate(w.operator.Process, w.exited, 15*time.Second)
	}
	if w.dns != nil {
		errs = append(errs, w.dns.stop())
	}
	if w.network != nil {
		errs = append(errs, w.network.Remove())
	}
	if w.CP != nil {
		errs = append(errs, w.CP.Stop(), w.CP.Cleanup())
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

// Kubelet returns a kubelet stand-in of this machine's node: on the
// walkthrough's pod network, pulling with its registries.conf, serving
// service-account tokens of the control plane, keeping pod files under dir
// and naming podman objects with prefix.
func (w *Walkthrough) Kubelet(dir, prefix string) *podman.Kubelet {
	return &podman.Kubelet{Client: w.Client, Dir: dir, Prefix: prefix, RegistriesConf: w.opts.RegistriesConf, Network: w.network,
		API: &podman.APIServer{URL: w.CP.Config.Host, CA: w.CP.Config.CAData}}
}

// Step starts a numbered step of the narration.
func (w *Walkthrough) Step(format string, args ...any) {
	if w.began.IsZero() {
		w.began = time.Now()
	}
	w.step++
	fmt.Fprintf(w.opts.Out, "\n%d. [%5.1fs] %s\n", w.step, time.Since(w.began).Seconds(), fmt.Sprintf(format, args...))
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

func (w *Walkthrough) sayResults(results []podman.ContainerResult) {
	for _, r := range results {
		switch {
		case r.Running:
			w.Say("  %-22s running", r.Name)
		case !r.Ran:
			w.Say("  %-22s not started %s", r.Name, r.Error)
		default:
			w.Say("  %-22s exited %d", r.Name, r.ExitCode)
			if r.ExitCode != 0 && r.TerminationMessage != "" {
				w.Say("  %-22s termination message:", "")
				w.Say("%s", indent(strings.TrimSpace(r.TerminationMessage), 6))
			}
		}
	}
}

func indent(text string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(text, "\n", "\n"+pad)
}

// Redact replaces the values of the deployment's variable Secrets in
// namespace ns found in text by the Secret's name: the walkthrough shows
// rendered files, and credentials stay out of its output.
func (w *Walkthrough) Redact(ctx context.Context, ns, text string) (string, error) {
	var secrets corev1.SecretList
	if err := w.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{names.LabelManagedBy: names.ManagedBy}); err != nil {
		return "", err
	}
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			if len(v) >= 8 {
				text = strings.ReplaceAll(text, string(v), fmt.Sprintf("(%s %s)", s.Name, k))
			}
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

// poll calls done every 200 ms until it is true or fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return done() })
	if wait.Interrupted(err) {
		return fmt.Errorf("waiting for %s: not there after %s", what, timeout)
	}
	return err
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tail(path string, lines int) string {
	data, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// Status is the job runner's status on manifest Secret name in ns.
func (w *Walkthrough) Status(ctx context.Context, ns, name string) (runner.Status, error) {
	var s corev1.Secret
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return runner.Status{}, err
	}
	return runner.StatusOf(&s), nil
}

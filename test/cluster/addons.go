package cluster

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/dnsserver"
)

// buildImages builds the pod sandbox image (pause, from this repository)
// and a CoreDNS image (the binary `make testbin` built) and pushes them to
// the cluster's registry: no registry outside this machine is reachable.
func (c *Cluster) buildImages(ctx context.Context) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	pause := filepath.Join(c.Dir, "images", "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", pause, "./test/cluster/pause")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pause image's program: %v: %s", err, out)
	}
	coredns, err := dnsserver.Binary()
	if err != nil {
		return err
	}
	c.PauseImage = c.Registry + "/bosh-injector/pause:3.10"
	// `make coredns` keys its directory by the version: coredns-<version>.
	c.CoreDNSImage = c.Registry + "/bosh-injector/coredns:" + strings.TrimPrefix(filepath.Base(filepath.Dir(coredns)), "coredns-")
	if err := PushBinary(ctx, c.PauseImage, pause, "/pause"); err != nil {
		return err
	}
	return PushBinary(ctx, c.CoreDNSImage, coredns, "/coredns")
}

// PushBinary pushes an image holding only the static binary at path, as
// the image's entrypoint at dest, to ref (a plain-HTTP registry of a test
// cluster).
func PushBinary(ctx context.Context, ref, path, dest string) error {
	if err := static(path); err != nil {
		return err
	}
	layerFile, err := binaryLayer(path, dest)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromFile(layerFile)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: []string{dest}, Env: []string{"PATH=/"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// binaryLayer returns the gzipped layer holding the binary at path as
// dest, from a cache outside the repository keyed by the binary's content:
// compressing the cert-manager and CoreDNS binaries (150 MB) took seconds
// of CPU at every cluster start.
func binaryLayer(path, dest string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	out := filepath.Join(cache, "bosh-injector", "layers", hex.EncodeToString(sum[:])+"-"+filepath.Base(dest)+".tar.gz")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	// Another cluster may write the same layer meanwhile: each writes its
	// own file and renames it into place.
	tmp, err := os.CreateTemp(filepath.Dir(out), ".layer-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	gz, err := gzip.NewWriterLevel(tmp, gzip.BestSpeed)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(gz)
	err = tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dest, "/"), Mode: 0o755, Size: int64(len(data))})
	if err == nil {
		_, err = tw.Write(data)
	}
	if err = errors.Join(err, tw.Close(), gz.Close(), tmp.Close()); err != nil {
		return "", fmt.Errorf("writing the layer of %s: %w", path, err)
	}
	return out, os.Rename(tmp.Name(), out)
}

// static fails for a binary that needs a dynamic loader: the image holds
// nothing else.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked and cannot run alone in an image: remove it and run `make testbin`, which builds it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// corefile is kubeadm's default since v1.32 (kubernetes#128359): answers
// of the cluster domain are not cached, so a pod's own name resolves as
// soon as its endpoint exists, not a denial's TTL (5 s) later.
const corefile = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30 {
        disable success cluster.local
        disable denial cluster.local
    }
    loop
    reload
}
`

// startAddons creates what a cluster's installer adds: CoreDNS as
// kube-dns (the default StorageClass is startCSI's); and
// waits for them and for the default namespace's ServiceAccount (pods
// created before it exists are refused).
func (c *Cluster) startAddons(ctx context.Context) error {
	const ns = "kube-system"
	labels := map[string]string{"k8s-app": "kube-dns"}
	objects := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:coredns"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: ns}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns}, Data: map[string]string{"Corefile": corefile}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: labels},
			Spec: corev1.ServiceSpec{ClusterIP: DNSServiceIP, Selector: labels, Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					ServiceAccountName: "coredns", DNSPolicy: corev1.DNSDefault, PriorityClassName: "system-cluster-critical",
					NodeSelector: c.systemNode(),
					Containers: []corev1.Container{{Name: "coredns", Image: c.CoreDNSImage, Args: []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", ContainerPort: 53}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
							PeriodSeconds: 1},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}}}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}}}}},
				}}}},
	}
	for _, o := range objects {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	if err := until(ctx, nil, "the default namespace's ServiceAccount", time.Minute, func() bool {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}) == nil
	}); err != nil {
		return err
	}
	return until(ctx, nil, "CoreDNS (kube-system/coredns) to be Ready", 2*time.Minute, func() bool {
		var d appsv1.Deployment
		return c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "coredns"}, &d) == nil && d.Status.ReadyReplicas == 1
	})
}

// systemNode is the nodeSelector of the cluster's own pods: the first
// node, so that tests may drain or kill the others.
func (c *Cluster) systemNode() map[string]string {
	return map[string]string{corev1.LabelHostname: c.NodeName}
}

// startCertManager installs cert-manager as a user does, but from the
// binaries `make testbin` built (its own images are out of reach): its
// CRDs (server-side: two exceed the client-side apply annotation's limit),
// then its controller (self-signed and CA issuers) and cainjector as
// Deployments in namespace cert-manager, from images of those binaries in
// the cluster's registry, under a ServiceAccount bound to cluster-admin.
func (c *Cluster) startCertManager(ctx context.Context) error {
	crds := filepath.Join(c.BinDir, "cert-manager-crds")
	if out, err := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), "--kubeconfig="+c.Kubeconfig,
		"apply", "--server-side", "-f", crds).CombinedOutput(); err != nil {
		return fmt.Errorf("installing cert-manager's CRDs from %s: %v: %s", crds, err, out)
	}
	const ns = "cert-manager"
	// The test bin's directory is keyed by the versions it holds.
	_, version, _ := strings.Cut(filepath.Base(c.BinDir), "_cert-manager-")
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager", Namespace: ns}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "cert-manager", Namespace: ns}}},
	}
	var deployments []string
	for _, component := range []string{"controller", "cainjector"} {
		name := "cert-manager-" + component
		image := c.Registry + "/bosh-injector/" + name + ":" + cmp.Or(version, "dev")
		if err := PushBinary(ctx, image, filepath.Join(c.BinDir, name), "/"+name); err != nil {
			return err
		}
		labels := map[string]string{"app.kubernetes.io/name": name}
		objects = append(objects, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					ServiceAccountName: "cert-manager",
					NodeSelector:       c.systemNode(),
					Containers:         []corev1.Container{{Name: component, Image: image, Args: []string{"--v=2"}}},
				}}}})
		deployments = append(deployments, name)
	}
	for _, o := range objects {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return until(ctx, nil, "cert-manager's controller and cainjector to run", 2*time.Minute, func() bool {
		for _, name := range deployments {
			var d appsv1.Deployment
			if c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d) != nil || d.Status.ReadyReplicas != 1 {
				return false
			}
		}
		return true
	})
}

// Package e2e_test runs an injected pod with real containers: the fixture
// deployment is gathered on a real control plane, a labelled StatefulSet's
// pod is injected by the webhook, and the pod the apiserver stored runs under
// podman: copy, render (the operator image), then the BPM process, whose
// output is the configuration render produced.
package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/podman"
	"github.com/bosh-injector/bosh-injector/test/releaseimage"
	"github.com/bosh-injector/bosh-injector/webhook"
)

const (
	baseImage     = "docker.io/library/debian:bookworm-slim"
	operatorImage = "localhost/bosh-injector:dev"
	imagePrefix   = "localhost/bosh-injector-fixtures/"
	imageSuffix   = ":ubuntu-noble-1.0-1.0.0"
)

// programs are the fixture packages' executables; each is printconfig.
var programs = map[string][]string{"bus": {"bus"}, "store": {"pgstore"}, "shop": {"storefront", "smoke-tests"}}

func TestInjectedPodRuns(t *testing.T) {
	if err := podman.Check(baseImage); err != nil {
		t.Fatal(err)
	}
	if _, err := podman.Command(context.Background(), "image", "exists", operatorImage).Output(); err != nil {
		t.Fatalf("image %s missing: run `make image`", operatorImage)
	}
	ctx := context.Background()
	work := t.TempDir()

	// The fixture release images, every package program being printconfig.
	printconfig := filepath.Join(work, "printconfig")
	build := exec.Command("go", "build", "-o", printconfig, "./printconfig")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for rel, progs := range programs {
		pkgs := map[string]map[string]string{}
		for _, p := range progs {
			pkgs[p] = map[string]string{"bin/" + p: printconfig}
		}
		if err := releaseimage.Build(ctx, releaseimage.Release{Dir: fixtures.ReleaseDir(rel), Packages: pkgs, Base: baseImage, Image: imagePrefix + rel + imageSuffix}); err != nil {
			t.Fatal(err)
		}
	}

	cp, err := controlplane.Start(controlplane.Options{
		ControllerManager: true,
		Webhook:           envtest.WebhookInstallOptions{Paths: []string{"../../webhook/manifests/mutatingwebhookconfiguration.yaml"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	serving := cp.WebhookServerOptions()
	mgr, err := webhook.NewManager(cp.Config, webhook.Options{Namespace: "bosh-injector", OperatorImage: operatorImage, ClusterDomain: "cluster.local",
		Host: serving.Host, Port: serving.Port, CertDir: serving.CertDir, Webhook: true}, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = mgr.Start(mctx) }()
	mgr.GetCache().WaitForCacheSync(ctx)

	// Gather the shop deployment (the gathering Job's work, done here).
	const ns = "shop"
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	manifest, err := fixtures.ShopManifest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fixtures.ApplyManifest(ctx, cp.Client, ns, manifest); err != nil {
		t.Fatal(err)
	}
	jobsDir := filepath.Join(work, "jobs-src")
	if err := fixtures.LayoutReleases(jobsDir); err != nil {
		t.Fatal(err)
	}
	if _, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobsDir, ClusterDomain: "cluster.local"},
		gathering.NewRenderBPM(ctx), time.Now()); err != nil {
		t.Fatal(err)
	}

	// A labelled StatefulSet of the web group; its pod is injected.
	labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelAZIndex: "1"}
	if err := cp.Client.Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-z1", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "storefront-storefront", Image: imagePrefix + "shop" + imageSuffix}}}}},
	}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	for deadline := time.Now().Add(30 * time.Second); cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-z1-0"}, &pod) != nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the StatefulSet's pod did not appear")
		}
	}
	if _, ok := pod.Annotations[names.AnnotationInjected]; !ok {
		t.Fatal("the pod was not injected")
	}
	secrets := map[string]*corev1.Secret{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			var s corev1.Secret
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.Secret.SecretName}, &s); err != nil {
				t.Fatal(err)
			}
			secrets[s.Name] = &s
		}
	}

	run, err := podman.Adapt(&pod, podman.Env{Secrets: secrets, PodIP: "127.0.0.1", Dir: t.TempDir(), VolumePrefix: "e2e-" + strings.ToLower(t.Name()) + "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Remove() })
	if err := run.Play(ctx); err != nil {
		t.Fatal(err)
	}
	logs, err := run.WaitForLog(ctx, "storefront-storefront", "listen_port:", 2*time.Minute)
	if err != nil {
		results, _ := run.Wait(ctx, time.Second)
		t.Fatalf("%v\n%s\ncontainers: %+v", err, logs, results)
	}
	for _, want := range []string{
		"==> /var/vcap/jobs/storefront/config/storefront.yml <==",
		"listen_port: 8080",
		"host: shop-db-0.shop.svc.cluster.local",
		"- nats://shop-bus-2.shop.svc.cluster.local:4222",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the process's output lacks %q:\n%s", want, logs)
		}
	}
}

package podman_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/test/podman"
)

const base = "docker.io/library/debian:bookworm-slim"

// A pod as the apiserver would store it: a root init container writes into
// an emptyDir, a non-root container reads it back with a Secret volume,
// downward-API and secretKeyRef env, and ends with a termination message.
func TestPlay(t *testing.T) {
	if err := podman.Check(base); err != nil {
		t.Fatal(err)
	}
	sh := func(name string, uid int64, script string) corev1.Container {
		return corev1.Container{
			Name: name, Image: base, Command: []string{"sh", "-c", script},
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(uid)},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "shared", MountPath: "/shared"},
				{Name: "creds", MountPath: "/creds", ReadOnly: true},
				{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
			},
		}
	}
	main := sh("main", 1000, `cat /shared/from-init; echo "ns=$NS ip=$IP pass=$PASS file=$(cat /creds/password)"; echo broke >/dev/termination-log; exit 3`)
	main.Env = []corev1.EnvVar{
		{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "PASS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "play-test", Namespace: "ns1"},
		Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{sh("init", 0, "echo written-by-root > /shared/from-init")},
			Containers:     []corev1.Container{main},
			Volumes: []corev1.Volume{
				{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
			},
		},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"password": []byte("s3cret")}}

	run, err := podman.Adapt(pod, podman.Env{
		Secrets: map[string]*corev1.Secret{"creds": secret}, PodIP: "127.0.0.1",
		Dir: t.TempDir(), Prefix: "podman-test-",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := run.Remove(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	if err := run.Play(ctx); err != nil {
		t.Fatal(err)
	}
	results, err := run.Wait(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || !results[0].Ran || results[0].ExitCode != 0 {
		t.Fatalf("init container: %+v", results)
	}
	got := results[1]
	if !got.Ran || got.ExitCode != 3 || strings.TrimSpace(got.TerminationMessage) != "broke" {
		t.Fatalf("main container: %+v", got)
	}
	want := "written-by-root\nns=ns1 ip=127.0.0.1 pass=s3cret file=s3cret\n"
	if got.Logs != want {
		t.Fatalf("logs %q, want %q", got.Logs, want)
	}
}

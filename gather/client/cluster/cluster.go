// Package cluster is how the client commands (run-errand, the day-2
// commands) reach a deployment: the user's kubeconfig credentials, the
// deployment's manifest Secret, and exec into an instance's containers as
// kubectl does.
package cluster

import (
	"context"
	"fmt"
	"io"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// Cluster is how a client command reaches the cluster: the user's own
// credentials.
type Cluster struct {
	Config *rest.Config
	Client client.Client
	Kube   kubernetes.Interface
}

// Streams are an exec's standard streams; a nil one is not attached. TTY
// asks for a terminal, as `kubectl exec -t`.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
}

// Exec runs command in a container of pod and returns when it ended; its
// non-zero exit status is an error with ExitStatus() int.
func (c Cluster) Exec(ctx context.Context, pod *corev1.Pod, container string, command []string, s Streams) error {
	req := c.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   command,
			Stdin:     s.Stdin != nil, Stdout: s.Stdout != nil, Stderr: s.Stderr != nil && !s.TTY, TTY: s.TTY,
		}, scheme.ParameterCodec)
	exec, err := executor(c.Config, req.URL())
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Stdin: s.Stdin, Stdout: s.Stdout, Tty: s.TTY}
	if !s.TTY {
		opts.Stderr = s.Stderr
	}
	return exec.StreamWithContext(ctx, opts)
}

// executor is the exec protocol kubectl uses: WebSocket, else SPDY.
func executor(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// ManifestSecret is the deployment's manifest Secret (status.IsManifest).
func ManifestSecret(ctx context.Context, c client.Reader, namespace, deployment string) (*corev1.Secret, error) {
	secrets, err := status.ManifestSecrets(ctx, c, namespace, deployment)
	if err != nil {
		return nil, err
	}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("deployment '%s' has no manifest Secret in namespace %s (label %s=%s, key %s)", deployment, namespace, names.LabelDeployment, names.LabelValue(deployment), names.ManifestKey)
	}
	return secrets[0], nil
}

// Manifest is the deployment's manifest Secret and its manifest, with the
// Secret's ops files applied.
func Manifest(ctx context.Context, c client.Reader, namespace, name string) (*corev1.Secret, *manifest.Manifest, error) {
	secret, err := ManifestSecret(ctx, c, namespace, name)
	if err != nil {
		return nil, nil, err
	}
	doc, err := deployment.Document(secret.Data[names.ManifestKey], deployment.OpsFilesOf(secret.Data))
	if err != nil {
		return nil, nil, fmt.Errorf("manifest Secret %s: %w", secret.Name, err)
	}
	m, err := manifest.FromDocument(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest Secret %s: %w", secret.Name, err)
	}
	return secret, m, nil
}

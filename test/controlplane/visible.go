package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Visible is what anyone who may read namespace sees of a run: its Pods as
// `kubectl get pods -o yaml` prints them (termination messages included)
// and its Events of both APIs, as one text to search for values that must
// never show.
func (cp *ControlPlane) Visible(ctx context.Context, namespace string) (string, error) {
	cp.viewerOnce.Do(func() { cp.viewer, cp.viewerErr = cp.KubeconfigFile("viewer") })
	if cp.viewerErr != nil {
		return "", cp.viewerErr
	}
	pods, err := exec.CommandContext(ctx, filepath.Join(cp.BinDir, "kubectl"), "--kubeconfig", cp.viewer,
		"get", "pods", "--namespace", namespace, "--output", "yaml").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubectl get pods: %w: %s", err, pods)
	}
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events, client.InNamespace(namespace)); err != nil {
		return "", err
	}
	var newEvents eventsv1.EventList
	if err := cp.Client.List(ctx, &newEvents, client.InNamespace(namespace)); err != nil {
		return "", err
	}
	all, err := json.Marshal([]any{events, newEvents})
	if err != nil {
		return "", err
	}
	return string(pods) + "\n" + string(all), nil
}

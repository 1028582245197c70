package podman

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIServer is how a node's pods reach the apiserver: its URL (on the
// node's loopback, so pods that use it share the host's network) and the
// CA of its serving certificate, which kube-root-ca.crt holds in a cluster.
type APIServer struct {
	URL string
	CA  []byte
}

// tokenVolumes projects, as a kubelet does, the pod's volumes holding a
// service-account token: each becomes a directory with a token requested
// for the pod's ServiceAccount and bound to the pod, kube-root-ca.crt's
// ca.crt, and the namespace from the downward API. It returns the
// directories by volume name; the pod then runs with exactly the rights
// its ServiceAccount has, in the containers that mount the volume only.
func (k *Kubelet) tokenVolumes(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	if k.API == nil {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if !isTokenVolume(v) {
			continue
		}
		vdir := filepath.Join(dir, "projected-"+v.Name)
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, err
		}
		mode := os.FileMode(0o644)
		if v.Projected.DefaultMode != nil {
			mode = os.FileMode(*v.Projected.DefaultMode)
		}
		for _, src := range v.Projected.Sources {
			files, err := k.project(ctx, pod, src)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			for path, data := range files {
				if err := os.WriteFile(filepath.Join(vdir, path), data, mode); err != nil {
					return nil, err
				}
			}
		}
		out[v.Name] = vdir
	}
	return out, nil
}

// project returns the files of one projection source by path.
func (k *Kubelet) project(ctx context.Context, pod *corev1.Pod, src corev1.VolumeProjection) (map[string][]byte, error) {
	switch {
	case src.ServiceAccountToken != nil:
		t := src.ServiceAccountToken
		sa := pod.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: t.ExpirationSeconds,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}
		if t.Audience != "" {
			req.Spec.Audiences = []string{t.Audience}
		}
		account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: sa}}
		if err := k.Client.SubResource("token").Create(ctx, account, req); err != nil {
			return nil, fmt.Errorf("token for ServiceAccount %s: %w", sa, err)
		}
		return map[string][]byte{t.Path: []byte(req.Status.Token)}, nil
	case src.ConfigMap != nil && src.ConfigMap.Name == "kube-root-ca.crt":
		files := map[string][]byte{}
		for _, item := range src.ConfigMap.Items {
			if item.Key != "ca.crt" {
				return nil, fmt.Errorf("kube-root-ca.crt has no key %s", item.Key)
			}
			files[item.Path] = k.API.CA
		}
		return files, nil
	case src.DownwardAPI != nil:
		files := map[string][]byte{}
		for _, item := range src.DownwardAPI.Items {
			if item.FieldRef == nil || item.FieldRef.FieldPath != "metadata.namespace" {
				return nil, fmt.Errorf("downward API item %s: only metadata.namespace is projected here", item.Path)
			}
			files[item.Path] = []byte(pod.Namespace)
		}
		return files, nil
	}
	return nil, fmt.Errorf("a projection of a token volume this stand-in does not serve: %+v", src)
}

// apiEnv is what a kubelet tells every container of where the apiserver
// is (client-go's in-cluster configuration reads it).
func (a *APIServer) apiEnv() ([]corev1.EnvVar, error) {
	u, err := url.Parse(a.URL)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("apiserver URL %s: %w", a.URL, err)
	}
	return []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: host}, {Name: "KUBERNETES_SERVICE_PORT", Value: port}}, nil
}

// isTokenVolume says whether v holds a service-account token: the one the
// apiserver adds, or one the pod projects itself.
func isTokenVolume(v corev1.Volume) bool {
	if v.Projected == nil {
		return false
	}
	for _, s := range v.Projected.Sources {
		if s.ServiceAccountToken != nil {
			return true
		}
	}
	return false
}

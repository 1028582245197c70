package dns

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Selector selects every DNS records ConfigMap; the CoreDNS sidecar watches
// them in all namespaces.
var Selector = client.MatchingLabels{names.LabelSecretKind: names.KindDNS}

// Versions lists the stored DNS records of a deployment, oldest first.
func Versions(ctx context.Context, c client.Reader, namespace, deployment string) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(namespace), Selector,
		client.MatchingLabels{names.LabelDeployment: names.LabelValue(deployment)}); err != nil {
		return nil, fmt.Errorf("listing DNS records of deployment %q: %w", deployment, err)
	}
	out := slices.DeleteFunc(list.Items, func(cm corev1.ConfigMap) bool { return Version(&cm) < 1 })
	slices.SortFunc(out, func(a, b corev1.ConfigMap) int { return Version(&a) - Version(&b) })
	return out, nil
}

// Version is a DNS records ConfigMap's version, 0 when it has none.
func Version(cm *corev1.ConfigMap) int {
	n, err := strconv.Atoi(cm.Labels[names.LabelVersion])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// Write stores the zone of a deployment as a new immutable version
// "<deployment>.dns-v<N>" when it differs from the latest one, and prunes
// versions older than the newest versions.Keep (no pod mounts them: the
// CoreDNS sidecar reads the latest). It returns the name holding zone.
func Write(ctx context.Context, c client.Client, namespace, deployment, origin string, zone []byte, owner *metav1.OwnerReference) (string, bool, error) {
	existing, err := Versions(ctx, c, namespace, deployment)
	if err != nil {
		return "", false, err
	}
	data := map[string]string{names.DNSZoneKey: origin, names.DNSRecordsKey: string(zone)}
	next := 1
	if n := len(existing); n > 0 {
		latest := &existing[n-1]
		if maps.Equal(latest.Data, data) {
			return latest.Name, false, nil
		}
		next = Version(latest) + 1
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.DNSConfigMap(deployment, next),
			Namespace: namespace,
			Labels: map[string]string{
				names.LabelDeployment: names.LabelValue(deployment),
				names.LabelSecretKind: names.KindDNS,
				names.LabelVersion:    strconv.Itoa(next),
				names.LabelManagedBy:  names.ManagedBy,
			},
			Annotations: map[string]string{names.AnnotationDeploymentName: deployment},
		},
		Immutable: new(true),
		Data:      data,
	}
	if owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if err := c.Create(ctx, cm); err != nil {
		return "", false, fmt.Errorf("creating ConfigMap %s: %w", cm.Name, err)
	}
	all := append(existing, *cm)
	for i := range all[:max(len(all)-versions.Keep, 0)] {
		if err := c.Delete(ctx, &all[i]); err != nil && !apierrors.IsNotFound(err) {
			return cm.Name, true, fmt.Errorf("deleting old version %s: %w", all[i].Name, err)
		}
	}
	return cm.Name, true, nil
}

package gathering

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/links"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/versions"
)

// sharedLinks answers consumers naming another deployment of the namespace:
// a deployment exists when its manifest Secret does, and shares the latest
// version of each link Secret its gathering published.
func sharedLinks(ctx context.Context, c client.Reader, namespace string) (func(string) ([]links.SharedLink, bool), error) {
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.HasLabels{names.LabelDeployment}); err != nil {
		return nil, fmt.Errorf("listing the namespace's deployments: %w", err)
	}
	exists := map[string]bool{}
	latest := map[[2]string]*corev1.Secret{}
	for i := range list.Items {
		s := &list.Items[i]
		dep := names.LabelValue(s.Labels[names.LabelDeployment])
		if s.Data[names.ManifestKey] != nil {
			exists[dep] = true
		}
		if s.Labels[names.LabelSecretKind] != names.KindLink {
			continue
		}
		key := [2]string{dep, s.Labels[names.LabelInstanceGroup]}
		if have := latest[key]; have == nil || versions.Number(s) > versions.Number(have) {
			latest[key] = s
		}
	}
	shared := map[string][]links.SharedLink{}
	for key, s := range latest {
		var l links.SharedLink
		if err := json.Unmarshal(s.Data[names.LinkKey], &l); err != nil {
			return nil, fmt.Errorf("reading shared link %s: %w", s.Name, err)
		}
		shared[key[0]] = append(shared[key[0]], l)
	}
	return func(deployment string) ([]links.SharedLink, bool) {
		dep := names.LabelValue(deployment)
		return shared[dep], exists[dep]
	}, nil
}

// publish writes every link the deployment shares as a versioned Secret
// "<deployment>.link.<name>-v<N>" (the link's name in the instance-group
// label), which the consuming deployments' gatherings read, over the stored
// versions. It deletes every version of the links no longer shared (not
// marked shared any more, or their job or group gone): their consumers then
// get the director's "No link providers found" rather than the last
// addresses, and the deletion starts their gathering (the runner's input
// digest covers the links they consume). It returns what it wrote, the
// series written for pruning, and what it deleted.
func publish(ctx context.Context, c client.Client, stored versions.Stored, namespace, deployment string, shared []links.SharedLink, owner *metav1.OwnerReference) ([]versions.Result, [][]versions.Version, []string, error) {
	var out []versions.Result
	var series [][]versions.Version
	current := map[string]bool{}
	for _, l := range shared {
		data, err := json.Marshal(l)
		if err != nil {
			return out, series, nil, fmt.Errorf("shared link '%s': %w", l.Name, err)
		}
		key := versions.Key{Namespace: namespace, Deployment: deployment, Kind: names.KindLink, InstanceGroup: l.Name}
		res, written, err := versions.WriteOver(ctx, c, versions.Desired{Key: key, Data: map[string][]byte{names.LinkKey: data}, Owner: owner}, stored.Of(key))
		if err != nil {
			return out, series, nil, err
		}
		out = append(out, res)
		series = append(series, written)
		current[names.LabelValue(l.Name)] = true
	}
	var deleted []string
	for label, gone := range stored.OfKind(names.KindLink) {
		if current[label] {
			continue
		}
		for _, v := range gone {
			if err := c.Delete(ctx, v.Secret); err != nil && !apierrors.IsNotFound(err) {
				return out, series, deleted, fmt.Errorf("deleting Secret %s of a link no longer shared: %w", v.Secret.Name, err)
			}
			deleted = append(deleted, v.Secret.Name)
		}
	}
	return out, series, deleted, nil
}

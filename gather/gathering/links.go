package gathering

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/model/links"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// sharedLinks answers consumers naming another deployment of the namespace
// from consumed (Plan.Consumed): a deployment exists when the runner found
// its manifest Secret, and shares the link Secrets its accepted gathering
// left, read as accepted.
func sharedLinks(ctx context.Context, c client.Reader, namespace string, consumed map[string][]trust.Ref) (func(string) ([]links.SharedLink, bool), error) {
	shared := map[string][]links.SharedLink{}
	for dep, secrets := range consumed {
		for _, ref := range secrets {
			var s corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &s); err != nil {
				return nil, fmt.Errorf("reading shared link %s: %w", ref.Name, err)
			}
			if !ref.Matches(&s) {
				return nil, fmt.Errorf("shared link %s of deployment '%s' is not the one its gathering wrote: gather that deployment again", ref.Name, dep)
			}
			var l links.SharedLink
			if err := json.Unmarshal(s.Data[names.LinkKey], &l); err != nil {
				return nil, fmt.Errorf("reading shared link %s: %w", s.Name, err)
			}
			shared[dep] = append(shared[dep], l)
		}
	}
	return func(deployment string) ([]links.SharedLink, bool) {
		dep := names.LabelValue(deployment)
		_, exists := consumed[dep]
		return shared[dep], exists
	}, nil
}

// publish writes every link the deployment shares as a versioned Secret
// "<deployment>.link.<name>-v<N>" (the link's name in the instance-group
// label), which the consuming deployments' gatherings read: a new version
// when it differs from the latest one the plan names.
func publish(ctx context.Context, c client.Client, namespace, deployment string, shared []links.SharedLink, p Plan, owner *metav1.OwnerReference) ([]versions.Result, map[string]trust.WrittenLink, error) {
	var out []versions.Result
	written := map[string]trust.WrittenLink{}
	for _, l := range shared {
		data, err := json.Marshal(l)
		if err != nil {
			return out, written, fmt.Errorf("shared link '%s': %w", l.Name, err)
		}
		key := versions.Key{Namespace: namespace, Deployment: deployment, Kind: names.KindLink, InstanceGroup: l.Name}
		existing := versions.Stored{}
		if name, ok := p.Shared[names.LabelValue(l.Name)]; ok {
			var s corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); client.IgnoreNotFound(err) != nil {
				return out, written, fmt.Errorf("reading shared link %s: %w", name, err)
			} else if err == nil {
				existing.Add(&s)
			}
		}
		res, series, err := versions.WriteOver(ctx, c, versions.Desired{Key: key, Data: map[string][]byte{names.LinkKey: data}, Owner: owner,
			Above: p.Above[Series(names.KindLink, names.LabelValue(l.Name))]}, existing.Of(key))
		if err != nil {
			return out, written, err
		}
		out = append(out, res)
		written[names.LabelValue(l.Name)] = trust.WrittenLinkOf(series[len(series)-1].Secret)
	}
	return out, written, nil
}

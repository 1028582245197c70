package gathering

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/dns"
	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// remoteGroups answers DNS alias targets in other deployments of the
// namespace from their latest BPM info (aliased, Plan.Aliased), which names
// the deployment as written and the group's instance count. A group's BPM
// info outlives its leaving the manifest (its pods may still run), its
// Services do not (that gathering deletes them): a group is there while it
// has Services. Each Secret is read once, however many targets name its
// group, and the Services are listed once.
func remoteGroups(ctx context.Context, c client.Reader, namespace string, aliased map[string]map[string]trust.Ref) dns.Remote {
	read := map[string]*bpm.Info{}
	var serviced map[[2]string]bool
	return func(deployment, group string) (string, int, bool, error) {
		key := [2]string{names.LabelValue(deployment), names.LabelValue(group)}
		ref, ok := aliased[key[0]][key[1]]
		if !ok {
			return "", 0, false, nil
		}
		if serviced == nil {
			var err error
			if serviced, err = servicedGroups(ctx, c, namespace); err != nil {
				return "", 0, false, err
			}
		}
		if !serviced[key] {
			return "", 0, false, nil
		}
		info, seen := read[ref.Name]
		if !seen {
			var s corev1.Secret
			switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &s); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return "", 0, false, fmt.Errorf("reading BPM info %s: %w", ref.Name, err)
			case !ref.Matches(&s):
				return "", 0, false, fmt.Errorf("BPM info %s of deployment '%s' is not the one its gathering wrote: gather that deployment again", ref.Name, deployment)
			default:
				info = &bpm.Info{}
				if err := secretdata.Decode(s.Data[bpm.InfoKey], info); err != nil {
					return "", 0, false, fmt.Errorf("reading BPM info %s: %w", ref.Name, err)
				}
			}
			read[ref.Name] = info
		}
		if info == nil {
			return "", 0, false, nil
		}
		return info.Deployment, info.Instances, true, nil
	}
}

// servicedGroups are the groups, by deployment and group label, that have
// managed Services in the namespace.
func servicedGroups(ctx context.Context, c client.Reader, namespace string) (map[[2]string]bool, error) {
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, client.InNamespace(namespace), client.MatchingLabels{names.LabelManagedBy: names.ManagedBy},
		client.HasLabels{names.LabelDeployment, names.LabelInstanceGroup}); err != nil {
		return nil, fmt.Errorf("listing the instance Services of the namespace's deployments: %w", err)
	}
	serviced := map[[2]string]bool{}
	for _, s := range svcs.Items {
		serviced[[2]string{s.Labels[names.LabelDeployment], s.Labels[names.LabelInstanceGroup]}] = true
	}
	return serviced, nil
}

package gathering

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/dns"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/versions"
)

// remoteGroups answers DNS alias targets in other deployments of the
// namespace from their latest BPM info, which names the deployment as
// written and the group's instance count. A group's BPM info outlives its
// leaving the manifest (its pods may still run), its Services do not (that
// gathering deletes them): a group is there while it has Services. Both are
// listed once, on the first such target.
func remoteGroups(ctx context.Context, c client.Reader, namespace string) dns.Remote {
	var latest map[[2]string]*corev1.Secret
	var serviced map[[2]string]bool
	return func(deployment, group string) (string, int, bool, error) {
		if latest == nil {
			var err error
			if latest, serviced, err = listGroups(ctx, c, namespace); err != nil {
				return "", 0, false, err
			}
		}
		key := [2]string{names.LabelValue(deployment), names.LabelValue(group)}
		s := latest[key]
		if s == nil || !serviced[key] {
			return "", 0, false, nil
		}
		var info bpm.Info
		if err := secretdata.Decode(s.Data[bpm.InfoKey], &info); err != nil {
			return "", 0, false, fmt.Errorf("reading BPM info %s: %w", s.Name, err)
		}
		return info.Deployment, info.Instances, true, nil
	}
}

// listGroups returns the latest BPM info Secret of every group of the
// namespace, and the groups having managed Services, both by deployment and
// group label.
func listGroups(ctx context.Context, c client.Reader, namespace string) (map[[2]string]*corev1.Secret, map[[2]string]bool, error) {
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(namespace), client.MatchingLabels{names.LabelSecretKind: names.KindBPM}); err != nil {
		return nil, nil, fmt.Errorf("listing the BPM info of the namespace's deployments: %w", err)
	}
	latest := map[[2]string]*corev1.Secret{}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		key := [2]string{s.Labels[names.LabelDeployment], s.Labels[names.LabelInstanceGroup]}
		if have := latest[key]; have == nil || versions.Number(s) > versions.Number(have) {
			latest[key] = s
		}
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, client.InNamespace(namespace), client.MatchingLabels{names.LabelManagedBy: names.ManagedBy},
		client.HasLabels{names.LabelDeployment, names.LabelInstanceGroup}); err != nil {
		return nil, nil, fmt.Errorf("listing the instance Services of the namespace's deployments: %w", err)
	}
	serviced := map[[2]string]bool{}
	for _, s := range svcs.Items {
		serviced[[2]string{s.Labels[names.LabelDeployment], s.Labels[names.LabelInstanceGroup]}] = true
	}
	return latest, serviced, nil
}

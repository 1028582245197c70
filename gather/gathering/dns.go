package gathering

import (
	"context"

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
// written and the group's instance count. The Secrets are listed once, on
// the first such target.
func remoteGroups(ctx context.Context, c client.Reader, namespace string) dns.Remote {
	var latest map[[2]string]*corev1.Secret
	return func(deployment, group string) (string, int, bool) {
		if latest == nil {
			latest = map[[2]string]*corev1.Secret{}
			var list corev1.SecretList
			if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{names.LabelSecretKind: names.KindBPM}); err != nil {
				return "", 0, false
			}
			for i := range list.Items {
				s := &list.Items[i]
				key := [2]string{s.Labels[names.LabelDeployment], s.Labels[names.LabelInstanceGroup]}
				if have := latest[key]; have == nil || versions.Number(s) > versions.Number(have) {
					latest[key] = s
				}
			}
		}
		s := latest[[2]string{names.LabelValue(deployment), names.LabelValue(group)}]
		if s == nil {
			return "", 0, false
		}
		var info bpm.Info
		if err := secretdata.Decode(s.Data[bpm.InfoKey], &info); err != nil {
			return "", 0, false
		}
		return info.Deployment, info.Instances, true
	}
}

package gathering

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/dns"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/secretdata"
)

// remoteGroups answers DNS alias targets in other deployments of the
// namespace from their latest BPM info (aliased, Plan.Aliased), which names
// the deployment as written and the group's instance count. Each Secret is
// read once, however many targets name its group.
func remoteGroups(ctx context.Context, c client.Reader, namespace string, aliased map[string]map[string]string) dns.Remote {
	read := map[string]*bpm.Info{}
	return func(deployment, group string) (string, int, bool) {
		name, ok := aliased[names.LabelValue(deployment)][names.LabelValue(group)]
		if !ok {
			return "", 0, false
		}
		info, seen := read[name]
		if !seen {
			var s corev1.Secret
			var decoded bpm.Info
			if c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s) == nil && secretdata.Decode(s.Data[bpm.InfoKey], &decoded) == nil {
				info = &decoded
			}
			read[name] = info
		}
		if info == nil {
			return "", 0, false
		}
		return info.Deployment, info.Instances, true
	}
}

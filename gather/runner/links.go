package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/versions"
	"github.com/bosh-injector/bosh-injector/gather/yamlvalue"
)

// consumedDeployments are the other deployments whose shared links the
// manifest consumes (`consumes: {<link>: {deployment: D}}` of any job of an
// instance group or addon), sorted.
func consumedDeployments(doc *yamlvalue.Map) []string {
	name, _ := doc.Get("name")
	seen := map[string]bool{}
	for _, list := range []string{"instance_groups", "addons"} {
		groups, _ := doc.Get(list)
		gs, _ := groups.([]any)
		for _, g := range gs {
			gm, _ := g.(*yamlvalue.Map)
			if gm == nil {
				continue
			}
			jobs, _ := gm.Get("jobs")
			js, _ := jobs.([]any)
			for _, j := range js {
				jm, _ := j.(*yamlvalue.Map)
				if jm == nil {
					continue
				}
				consumes, _ := jm.Get("consumes")
				cm, _ := consumes.(*yamlvalue.Map)
				if cm == nil {
					continue
				}
				for _, k := range cm.Keys() {
					entry, _ := cm.Get(k)
					em, _ := entry.(*yamlvalue.Map)
					if em == nil {
						continue
					}
					dep, _ := em.Get("deployment")
					if d, ok := dep.(string); ok && d != fmt.Sprint(name) && !strings.Contains(d, "((") {
						seen[d] = true
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// sharedLinkData is the content of the latest shared link Secrets of a
// deployment, by link name: a consumer's gathering input.
func (r *Reconciler) sharedLinkData(ctx context.Context, namespace, deployment string) (map[string][]byte, error) {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{
		names.LabelDeployment: names.LabelValue(deployment),
		names.LabelSecretKind: names.KindLink,
	}); err != nil {
		return nil, err
	}
	latest := map[string]*corev1.Secret{}
	for i := range list.Items {
		s := &list.Items[i]
		l := s.Labels[names.LabelInstanceGroup]
		if have := latest[l]; have == nil || versions.Number(s) > versions.Number(have) {
			latest[l] = s
		}
	}
	out := map[string][]byte{}
	for l, s := range latest {
		out[l] = s.Data[names.LinkKey]
	}
	return out, nil
}

func isSharedLink(o client.Object) bool {
	return o.GetLabels()[names.LabelSecretKind] == names.KindLink
}

// manifestsConsuming maps a shared link Secret to the manifest Secrets of
// its namespace that consume from its deployment.
func (r *Reconciler) manifestsConsuming(ctx context.Context, o client.Object) []reconcile.Request {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.HasLabels{names.LabelDeployment}); err != nil {
		r.Log.Error(err, "listing manifest Secrets")
		return nil
	}
	provider := o.GetLabels()[names.LabelDeployment]
	var reqs []reconcile.Request
	for i := range list.Items {
		s := &list.Items[i]
		if s.Data[names.ManifestKey] == nil {
			continue
		}
		in, err := Inspect(s.Data[names.ManifestKey], opsFiles(s))
		if err != nil {
			continue
		}
		if slices.ContainsFunc(in.Consumes, func(d string) bool { return names.LabelValue(d) == provider }) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
		}
	}
	return reqs
}

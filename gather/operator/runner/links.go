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

	"github.com/bosh-injector/bosh-injector/gather/gathering/dns"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// consumedDeployments are the other deployments whose shared links the
// manifest consumes (`consumes: {<link>: {deployment: D}}` of any job of an
// instance group or addon), sorted.
func consumedDeployments(doc *yamlvalue.Map) []string {
	name, _ := doc.Get("name")
	seen := map[string]bool{}
	for _, jm := range jobsOf(doc) {
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
	return slices.Sorted(maps.Keys(seen))
}

// aliasTargetDeployments are the other deployments that the targets of the
// manifest's BOSH DNS aliases name (the `aliases` property of its
// bosh-dns-aliases jobs), sorted: their groups and instances are in the
// deployment's DNS records.
func aliasTargetDeployments(doc *yamlvalue.Map) []string {
	name, _ := doc.Get("name")
	seen := map[string]bool{}
	for _, jm := range jobsOf(doc) {
		if job, _ := jm.Get("name"); job != dns.AliasesJob {
			continue
		}
		props, _ := jm.Get("properties")
		pm, _ := props.(*yamlvalue.Map)
		if pm == nil {
			continue
		}
		for _, am := range mapsAt(pm, "aliases") {
			for _, tm := range mapsAt(am, "targets") {
				dep, _ := tm.Get("deployment")
				if d, ok := dep.(string); ok && d != "" && d != fmt.Sprint(name) && !strings.Contains(d, "((") {
					seen[d] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// jobsOf are the jobs of every instance group and addon of the manifest.
func jobsOf(doc *yamlvalue.Map) []*yamlvalue.Map {
	var out []*yamlvalue.Map
	for _, list := range []string{"instance_groups", "addons"} {
		for _, g := range mapsAt(doc, list) {
			out = append(out, mapsAt(g, "jobs")...)
		}
	}
	return out
}

// mapsAt are the hashes in the list at key of m; anything else there is
// left to gather to report.
func mapsAt(m *yamlvalue.Map, key string) []*yamlvalue.Map {
	v, _ := m.Get(key)
	list, _ := v.([]any)
	var out []*yamlvalue.Map
	for _, e := range list {
		if em, _ := e.(*yamlvalue.Map); em != nil {
			out = append(out, em)
		}
	}
	return out
}

// isRecord says whether o is a record of accepted versions, which other
// deployments' gatherings read: its shared links, its groups that DNS
// aliases target.
func (r *Reconciler) isRecord(o client.Object) bool {
	return o.GetNamespace() == r.Config.TrustNamespace && o.GetLabels()[trust.LabelNamespace] != ""
}

// manifestsConsuming maps a deployment's record to the manifest Secrets of
// its namespace that consume links from the deployment or whose DNS
// aliases target it.
func (r *Reconciler) manifestsConsuming(ctx context.Context, o client.Object) []reconcile.Request {
	var list corev1.SecretList
	namespace := o.GetLabels()[trust.LabelNamespace]
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: status.ManifestCandidates}); err != nil {
		r.Log.Error(err, "listing manifest Secrets")
		return nil
	}
	provider := o.GetLabels()[names.LabelDeployment]
	var reqs []reconcile.Request
	for i := range list.Items {
		s := &list.Items[i]
		if !status.IsManifest(s) {
			continue
		}
		in, err := Inspect(s.Data[names.ManifestKey], opsFiles(s))
		if err != nil {
			continue
		}
		if slices.ContainsFunc(append(in.Consumes, in.AliasTargets...), func(d string) bool { return names.LabelValue(d) == provider }) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
		}
	}
	return reqs
}

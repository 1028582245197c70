package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// digest covers every input of a gathering: the manifest, the ops files, the
// redeploy annotation, the config server, the variable Secrets the user
// provided and the links consumed from other deployments. Variables bosh-injector generated
// are outputs of gathering, not inputs, so they are left out: including them
// would start a second gathering after every first one. It also returns
// the variables that have no Secret.
func (r *Reconciler) digest(ctx context.Context, manifest *corev1.Secret, ops []deployment.OpsFile, inputs Inputs) (string, []string, error) {
	h := sha256.New()
	write := func(name string, data []byte) {
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(data))
		h.Write(data)
	}
	write(names.ManifestKey, manifest.Data[names.ManifestKey])
	// Another config server (or none) may hold other values: changing the
	// mode, the server or the namespace's director name gathers its
	// deployments again, and what then differs rolls.
	if cs := r.Config.ConfigServer; cs.server() {
		write("config-server", []byte(cs.Mode+"\x00"+cs.URL+"\x00"+cs.Directors.Of(manifest.Namespace)))
	}
	for _, op := range ops {
		write(op.Name, op.Data)
	}
	if v, ok := manifest.Annotations[names.AnnotationRedeploy]; ok {
		write("redeploy", []byte(v))
	}
	deployment := manifest.Labels[names.LabelDeployment]
	var missing []string
	// A config server's values are read by the gathering, not watched.
	vars := inputs.Variables
	if r.Config.ConfigServer.server() {
		vars = nil
	}
	for _, v := range slices.Sorted(slices.Values(vars)) {
		s, err := r.variableSecret(ctx, manifest.Namespace, deployment, v)
		if err != nil {
			return "", nil, err
		}
		if s == nil {
			missing = append(missing, v)
			continue
		}
		if s.Labels[names.LabelManagedBy] == names.ManagedBy {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(s.Data)) {
			write("var/"+v+"/"+k, s.Data[k])
		}
	}
	// A provider's newly accepted link content re-gathers its consumers,
	// and a targeted deployment's newly accepted groups or instances the
	// deployments whose aliases name them: what their plans read.
	for _, in := range []struct {
		deps []string
		path string
		refs func(*trust.Record) map[string]trust.Ref
	}{
		{inputs.Consumes, "link/", func(rec *trust.Record) map[string]trust.Ref { return rec.Links }},
		{inputs.AliasTargets, "bpm/", func(rec *trust.Record) map[string]trust.Ref {
			out := map[string]trust.Ref{}
			for g, group := range rec.Groups {
				if v := group.Latest(); v != nil {
					out[g] = v.BPM
				}
			}
			return out
		}},
	} {
		for _, dep := range in.deps {
			rec, err := trust.Read(ctx, r.Client, r.Config.TrustNamespace, manifest.Namespace, dep)
			if err != nil {
				return "", nil, err
			}
			if rec == nil {
				continue
			}
			refs := in.refs(rec)
			for _, l := range slices.Sorted(maps.Keys(refs)) {
				write(in.path+dep+"/"+l, []byte(refs[l].Name+" "+refs[l].SHA256))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), missing, nil
}

// variableSecret is the Secret of variable v of deployment, nil when there
// is none. The cache holds labelled Secrets only: a user's unlabelled one
// is read from the API, so that it is never taken for a deleted variable
// to regenerate, nor left out of an import.
func (r *Reconciler) variableSecret(ctx context.Context, namespace, deployment, v string) (*corev1.Secret, error) {
	var s corev1.Secret
	key := types.NamespacedName{Namespace: namespace, Name: names.VariableSecret(deployment, v)}
	err := r.Client.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, &s)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// regenerated is the digest of the n-th gathering of the same inputs started
// to regenerate deleted variables; the first keeps the inputs' digest.
func regenerated(digest string, n int) string {
	if n == 0 {
		return digest
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00regeneration\x00%d", digest, n))
	return hex.EncodeToString(sum[:])
}

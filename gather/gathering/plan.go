package gathering

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// Plan is what the job runner, which may list the namespace's Secrets,
// tells a gathering to read besides its manifest and variables. The
// gathering's token reads Secrets by name only, and builds only on the
// versions the operator accepted: a Secret anyone else created with a
// deployment's labels is never reused, copied or taken for the latest.
type Plan struct {
	// Recorded is, by group label, the group's latest accepted version.
	Recorded map[string]trust.Version `json:"recorded,omitempty"`
	// Above is, by Series, the highest version number stored, accepted or
	// not: new versions go above it.
	Above map[string]int `json:"above,omitempty"`
	// Shared is, by link name label, the deployment's latest shared link
	// Secret.
	Shared map[string]string `json:"shared,omitempty"`
	// Consumed is, by deployment label, the shared link Secrets that the
	// last accepted gathering of each other deployment the manifest
	// consumes from left (none when it has a manifest Secret but no
	// accepted gathering yet).
	Consumed map[string][]trust.Ref `json:"consumed,omitempty"`
	// Aliased is, by deployment and group label, the latest accepted BPM
	// Secret of the groups of the other deployments the DNS aliases
	// target.
	Aliased map[string]map[string]trust.Ref `json:"aliased,omitempty"`
	// VariableSet is the deployment's accepted variable set (a config
	// server's ids): a set identical to it is reused.
	VariableSet string `json:"variableSet,omitempty"`
	// PinVariables reads the variables at VariableSet's ids: the accepted
	// gathering had the same inputs, so a gathering again (an operator
	// restarted, a Job pruned) must render what it rendered, as the
	// director's non-deploy actions use the last successful set. Otherwise
	// a gathering is a deploy and takes the current values.
	PinVariables bool `json:"pinVariables,omitempty"`
	// Import are the variables (manifest names) whose <deployment>.var-<name>
	// Secrets exist while a config server holds the variables: the
	// gathering imports those the server lacks, so a deployment moving
	// onto it keeps its values.
	Import []string `json:"import,omitempty"`
}

// Series names a series of versioned Secrets in Plan.Above.
func Series(kind, groupLabel string) string { return kind + "/" + groupLabel }

// String is p as the gather command's --plan flag.
func (p Plan) String() string {
	data, _ := json.Marshal(p)
	return string(data)
}

// ParsePlan reads the --plan flag.
func ParsePlan(s string) (Plan, error) {
	var p Plan
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return p, fmt.Errorf("the gathering plan: %w", err)
	}
	return p, nil
}

// Names are the Secrets p lets a gathering read, sorted.
func (p Plan) Names() []string {
	var out []string
	for _, v := range p.Recorded {
		out = append(out, v.BPM.Name, v.Resolved.Name)
	}
	out = slices.AppendSeq(out, maps.Values(p.Shared))
	for _, l := range p.Consumed {
		for _, r := range l {
			out = append(out, r.Name)
		}
	}
	for _, g := range p.Aliased {
		for _, r := range g {
			out = append(out, r.Name)
		}
	}
	if p.VariableSet != "" {
		out = append(out, p.VariableSet)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NewPlan is the plan of a gathering of deployment, which consumes links
// from the deployments consumes and whose DNS aliases target the
// deployments aliasTargets, read with c (which may list Secrets) and the
// records of accepted versions in trustNamespace: what other deployments
// share comes from their records too, never from a Secret that merely
// carries their labels. digest is the inputs digest of the gathering
// planned: the accepted one's, its variables are read at the accepted
// variable set's ids.
func NewPlan(ctx context.Context, c client.Reader, trustNamespace, namespace, deployment, digest string, consumes, aliasTargets []string) (Plan, error) {
	p := Plan{Recorded: map[string]trust.Version{}, Above: map[string]int{}, Shared: map[string]string{},
		Consumed: map[string][]trust.Ref{}, Aliased: map[string]map[string]trust.Ref{}}
	rec, err := trust.Read(ctx, c, trustNamespace, namespace, deployment)
	if err != nil {
		return p, err
	}
	if rec != nil {
		for label, g := range rec.Groups {
			p.Recorded[label] = *g.Latest()
		}
		if rec.VariableSet != nil {
			p.VariableSet, p.PinVariables = rec.VariableSet.Name, rec.Digest == digest
		}
	}
	stored, err := versions.ListDeployment(ctx, c, namespace, deployment)
	if err != nil {
		return p, err
	}
	for _, series := range stored.Series() {
		latest := versions.Latest(series).Secret
		kind, label := latest.Labels[names.LabelSecretKind], latest.Labels[names.LabelInstanceGroup]
		p.Above[Series(kind, label)] = versions.Number(latest)
		if kind == names.KindLink {
			p.Shared[label] = latest.Name
		}
	}
	for _, dep := range consumes {
		// Only a deployment with a manifest provides links; its versioned
		// Secrets, the largest, are not read for that.
		manifests, err := status.ManifestSecrets(ctx, c, namespace, dep)
		if err != nil {
			return p, fmt.Errorf("listing the Secrets of deployment '%s': %w", dep, err)
		}
		if len(manifests) == 0 {
			continue
		}
		other, err := trust.Read(ctx, c, trustNamespace, namespace, dep)
		if err != nil {
			return p, err
		}
		p.Consumed[names.LabelValue(dep)] = []trust.Ref{}
		if other != nil {
			for _, label := range slices.Sorted(maps.Keys(other.Links)) {
				p.Consumed[names.LabelValue(dep)] = append(p.Consumed[names.LabelValue(dep)], other.Links[label])
			}
		}
	}
	for _, dep := range aliasTargets {
		other, err := trust.Read(ctx, c, trustNamespace, namespace, dep)
		if err != nil {
			return p, err
		}
		groups := map[string]trust.Ref{}
		if other != nil {
			for label, g := range other.Groups {
				if v := g.Latest(); v != nil {
					groups[label] = v.BPM
				}
			}
		}
		p.Aliased[names.LabelValue(dep)] = groups
	}
	return p, nil
}

// recorded reads the Secrets of the versions p names as accepted, by name,
// and keeps those still as accepted: the versions a gathering builds on.
func recorded(ctx context.Context, c client.Reader, namespace string, p Plan) (versions.Stored, error) {
	out := versions.Stored{}
	for _, label := range slices.Sorted(maps.Keys(p.Recorded)) {
		v := p.Recorded[label]
		var got []*corev1.Secret
		for _, ref := range []trust.Ref{v.BPM, v.Resolved} {
			var s corev1.Secret
			err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &s)
			if client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("reading accepted version %s: %w", ref.Name, err)
			}
			// Gone or replaced: rendered over, as if absent.
			if err == nil && ref.Matches(&s) {
				got = append(got, &s)
			}
		}
		if len(got) == 2 {
			out.Add(got[0])
			out.Add(got[1])
		}
	}
	return out, nil
}

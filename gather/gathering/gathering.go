// Package gathering is `bosh-injector gather`: it reads a deployment's
// manifest Secret, resolves the deployment with the release jobs copied into
// the gathering pod, renders every instance's bpm.yml, and writes the
// per-instance-group Secrets, the instance Services and the DNS records. Either every
// instance group succeeds or nothing new is written.
package gathering

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/gathering/dns"
	"github.com/bosh-injector/bosh-injector/gather/gathering/kubevars"
	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/services"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
)

// Config says what to gather.
type Config struct {
	Namespace      string
	ManifestSecret string
	// JobsDir holds the releases' jobs as the copy init containers leave
	// them: <JobsDir>/<release>/<job>/job.MF.
	JobsDir       string
	ClusterDomain string
	// Build identifies the operator build (its version and commit): a BPM
	// rendered by another build is rendered again, as its Ruby or its
	// reading of bpm.yml may differ.
	Build string
	// Progress, when set, is told of each stage of a long gathering (one
	// of the Stage reasons, and a message naming no value).
	Progress Progress
	// Plan is what the job runner lets the gathering read; the zero Plan
	// builds on no stored version and reads no other deployment's.
	Plan Plan
	// ConfigServer, when set, holds the deployment's variables, as the
	// director's config server; nil keeps them in <deployment>.var-<name>
	// Secrets.
	ConfigServer *ConfigServer
	// Remember, when set, is told every variable value read or generated
	// (a redactor's): the gathering's logs never show one.
	Remember func(any)
}

// ConfigServer is the director's config server of a gathering.
type ConfigServer struct {
	Client *director.Client
	// Director is the /<director>/ of the deployment's names.
	Director string
	// Deployment is the deployment's name there: the manifest's, as it is.
	Deployment string
}

// Progress reports a gathering stage, or a warning, on the manifest Secret;
// eventType is corev1.EventTypeNormal or EventTypeWarning.
type Progress func(manifest *corev1.Secret, eventType, reason, message string)

// Stage reasons of Progress, and the reasons of its warnings about BPM
// settings pods honour only in part, DNS alias fields not honoured and
// alias targets naming groups the deployment does not have.
const (
	StageVariables           = "GatherVariables"
	StageLinks               = "GatherLinks"
	StageRendered            = "GatherRendered"
	ReasonVariablesImported  = "VariablesImported"
	ReasonBPMField           = "BPMFieldNotHonoured"
	ReasonAliasField         = "DNSAliasFieldNotHonoured"
	ReasonAliasTargetMissing = "DNSAliasTargetMissing"
)

func (cfg *Config) progress(manifest *corev1.Secret, reason, format string, args ...any) {
	if cfg.Progress != nil {
		cfg.Progress(manifest, corev1.EventTypeNormal, reason, fmt.Sprintf(format, args...))
	}
}

func (cfg *Config) warn(manifest *corev1.Secret, reason, message string) {
	if cfg.Progress != nil {
		cfg.Progress(manifest, corev1.EventTypeWarning, reason, message)
	}
}

// warnBPM reports, once per group, job, process and field, the BPM settings
// the injected pods honour only in part (the admission warnings go to the
// StatefulSet controller, which nobody reads).
func (cfg *Config) warnBPM(manifest *corev1.Secret, info *bpm.Info) {
	if cfg.Progress == nil {
		return
	}
	seen := map[string]bool{}
	for _, ib := range info.BPM {
		for _, w := range info.Warnings(ib.Indexes[0]) {
			if !seen[w] {
				seen[w] = true
				cfg.warn(manifest, ReasonBPMField, fmt.Sprintf("instance group '%s': %s", info.InstanceGroup, w))
			}
		}
	}
}

// RenderBPM renders bpm.yml of every instance of every group of d and
// returns, per group (in d's order), the instances grouped by identical
// BPM configuration.
type RenderBPM func(d *deployment.Deployment) ([][]bpm.InstanceBPM, error)

// Result lists what a gathering wrote.
type Result struct {
	Deployment string
	Groups     []GroupResult
	Services   services.Changes
	// Shared are the versions of the links the deployment shares, Links
	// their Secrets as reported, by link label.
	Shared []versions.Result
	Links  map[string]trust.WrittenLink
	// DNS is the ConfigMap holding the deployment's DNS records.
	DNS string
	// VariableSet is the variable set written or reused, with a config
	// server.
	VariableSet *trust.WrittenLink
}

// GroupResult is the Secret versions of one instance group.
type GroupResult struct {
	InstanceGroup    string
	Resolved, BPM    versions.Result
	ResolvedVersions int
	// written identifies both Secrets for the report.
	written trust.WrittenGroup
}

// Report is what the gathering's pod reports to the job runner (package
// trust): Written, and the links the deployment shares.
func (r *Result) Report() trust.Report {
	return trust.Report{Groups: r.Written(), Links: r.Links, VariableSet: r.VariableSet}
}

// Written is what the gathering left as each group's latest versions.
func (r *Result) Written() trust.Written {
	w := trust.Written{}
	for _, g := range r.Groups {
		w[names.LabelValue(g.InstanceGroup)] = g.written
	}
	return w
}

// lifecycleScripts are the job scripts, by their name under bin/, that the
// webhook runs or needs to know of.
var lifecycleScripts = []string{"pre-start", "post-start", "post-deploy", "pre-stop", "drain", "post-stop", "run", "dns/healthy"}

// Run gathers the deployment of cfg.ManifestSecret.
func Run(ctx context.Context, c client.Client, cfg Config, renderBPM RenderBPM, now time.Time) (*Result, error) {
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.ManifestSecret}, &secret); err != nil {
		return nil, fmt.Errorf("reading manifest Secret %s/%s: %w", cfg.Namespace, cfg.ManifestSecret, err)
	}
	data := secret.Data[names.ManifestKey]
	if data == nil {
		return nil, fmt.Errorf("manifest Secret %s/%s has no key %s", cfg.Namespace, cfg.ManifestSecret, names.ManifestKey)
	}
	ops := deployment.OpsFilesOf(secret.Data)
	owner := &metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: secret.Name, UID: secret.UID}
	dep := secret.Labels[names.LabelDeployment]

	// Variables are generated (and stored) before anything is
	// interpolated; a later failure keeps them, as the director does. The
	// manifest Secret does not own them: deleting it keeps them.
	secrets := kubevars.New(ctx, c, cfg.Namespace, dep)
	secrets.Remember(cfg.Remember)
	var vars variables.Source = secrets
	server, accepted, err := cfg.serverVariables(ctx, c, &secret, dep, ops)
	if err != nil {
		return nil, err
	}
	if server != nil {
		vars = server
	}
	m, err := deployment.Load(data, ops, vars, now)
	if err != nil {
		return nil, err
	}
	if m.Name != "" && names.LabelValue(m.Name) != names.LabelValue(dep) {
		return nil, fmt.Errorf("manifest Secret %s is labelled for deployment '%s' but the manifest's name is '%s'", cfg.ManifestSecret, dep, m.Name)
	}
	if cs := cfg.ConfigServer; cs != nil && m.Name != cs.Deployment {
		return nil, fmt.Errorf("the manifest's name is '%s', not '%s' as when the gathering started: gather again", m.Name, cs.Deployment)
	}
	cfg.progress(&secret, StageVariables, "manifest loaded with %d ops files; %d variables generated or read", len(ops), len(m.Variables))
	network := instance.Network{Namespace: cfg.Namespace, ClusterDomain: cfg.ClusterDomain}
	shared, err := sharedLinks(ctx, c, cfg.Namespace, cfg.Plan.Consumed)
	if err != nil {
		return nil, err
	}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: deployment.ImageLayoutSpecs(cfg.JobsDir), Variables: vars, Network: network, Shared: shared})
	if err != nil {
		return nil, err
	}
	cfg.progress(&secret, StageLinks, "properties bound and links resolved for %d instance groups", len(d.Groups))
	// The accepted versions tell which groups need no rendering, and
	// groups are then written over them.
	stored, err := recorded(ctx, c, cfg.Namespace, cfg.Plan)
	if err != nil {
		return nil, err
	}
	bpms, err := cfg.bpmOf(d, stored, renderBPM)
	if err != nil {
		return nil, err
	}
	for gi, b := range bpms {
		verb := "every template rendered"
		if b.reused {
			verb = "templates unchanged"
		}
		cfg.progress(&secret, StageRendered, "instance group '%s': %s for %d instances, %d distinct bpm.yml", d.Groups[gi].Manifest.Name, verb, len(d.Groups[gi].Instances), len(b.instances))
	}

	records, unions, missing, err := dns.Records(d, network, remoteGroups(ctx, c, cfg.Namespace, cfg.Plan.Aliased))
	if err != nil {
		return nil, err
	}
	for _, w := range missing {
		cfg.warn(&secret, ReasonAliasTargetMissing, w)
	}
	for _, w := range dns.Unhonoured(d) {
		cfg.warn(&secret, ReasonAliasField, w)
	}
	// Encode every group before writing anything: a group too large is an
	// error that must leave every latest version as it was.
	type pending struct {
		group    *deployment.Group
		resolved []byte
		info     bpm.Info
	}
	var all []pending
	var errs []string
	for gi := range d.Groups {
		g := &d.Groups[gi]
		enc, err := secretdata.Encode(resolved.FromDeployment(d, g, cfg.ClusterDomain))
		if err != nil {
			errs = append(errs, fmt.Sprintf("- Instance group '%s': resolved properties are %s", g.Manifest.Name, err))
			continue
		}
		info, err := bpmInfo(m, g, bpms[gi].instances)
		if err != nil {
			errs = append(errs, fmt.Sprintf("- Instance group '%s': %s", g.Manifest.Name, err))
			continue
		}
		info.Rendered = bpms[gi].rendered
		for _, u := range unions {
			if slices.ContainsFunc(u.Groups, func(ig string) bool { return names.LabelValue(ig) == names.LabelValue(g.Manifest.Name) }) {
				info.AliasLabels = append(info.AliasLabels, u.Label)
			}
		}
		cfg.warnBPM(&secret, &info)
		all = append(all, pending{group: g, resolved: enc, info: info})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	zone := names.DNSZone(d.Name, cfg.Namespace)

	// Groups are written concurrently; an unchanged group costs no API call.
	res := &Result{Deployment: d.Name, Groups: make([]GroupResult, len(all))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(services.Writers)
	for i, p := range all {
		g.Go(func() error {
			gr, err := writeGroup(gctx, c, stored, cfg.Plan.Above, versions.Key{Namespace: cfg.Namespace, Deployment: d.Name, InstanceGroup: p.group.Manifest.Name}, p.resolved, p.info, owner)
			res.Groups[i] = gr
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return &Result{Deployment: d.Name}, err
	}
	var desired []services.Desired
	for _, p := range all {
		// The group Service is the first label of the group's address, which
		// the 253-character rule may have shortened.
		groupService, _, _ := strings.Cut(p.group.Address, ".")
		ig := p.group.Manifest.Name
		desired = append(desired, services.Desired{Name: groupService, InstanceGroup: ig})
		for _, inst := range p.group.Instances {
			desired = append(desired, services.Desired{Name: inst.Service, InstanceGroup: ig, Index: &inst.Index})
		}
		for _, s := range instance.Subsets(p.group.Manifest.AZs) {
			name, _, err := network.SubsetAddress(d.Name, ig, s)
			if err != nil {
				return res, err
			}
			desired = append(desired, services.Desired{Name: name, InstanceGroup: ig, AZ: s.AZ, Healthy: s.Healthy})
		}
	}
	for _, u := range unions {
		desired = append(desired, services.Desired{Name: u.Service, AliasLabel: u.Label, AliasDomain: u.Domain})
	}
	if res.Services, err = services.Apply(ctx, c, cfg.Namespace, d.Name, desired, owner); err != nil {
		return res, err
	}
	if res.Shared, res.Links, err = publish(ctx, c, cfg.Namespace, d.Name, d.Shared, cfg.Plan, owner); err != nil {
		return res, err
	}
	// The job runner prunes old versions: the gathering may not list or
	// delete Secrets.
	if res.DNS, _, err = dns.Write(ctx, c, cfg.Namespace, d.Name, zone, dns.ZoneFile(zone, records), owner); err != nil || server == nil {
		return res, err
	}
	// The set is written last: only a gathering that wrote everything else
	// leaves one.
	res.VariableSet, err = writeVariableSet(ctx, c, cfg, d.Name, server.Set(), accepted, owner)
	return res, err
}

// serverVariables is the deployment's variables on the config server (nil
// without one), at the ids of the accepted variable set when the plan pins
// them, with the Secrets the plan names imported; and the accepted set.
func (cfg *Config) serverVariables(ctx context.Context, c client.Client, manifest *corev1.Secret, dep string, ops []deployment.OpsFile) (*director.Source, *corev1.Secret, error) {
	cs := cfg.ConfigServer
	if cs == nil {
		return nil, nil, nil
	}
	accepted, err := acceptedSet(ctx, c, cfg.Namespace, cfg.Plan.VariableSet)
	if err != nil {
		return nil, nil, err
	}
	var pinned map[string]string
	if cfg.Plan.PinVariables && accepted != nil {
		if err := json.Unmarshal(accepted.Data[names.VariableSetKey], &pinned); err != nil {
			return nil, nil, fmt.Errorf("the accepted variable set %s: %w", accepted.Name, err)
		}
	}
	server := director.NewSource(ctx, cs.Client, cs.Director, cs.Deployment, pinned)
	server.Remember(cfg.Remember)
	imported, err := importSecrets(server, kubevars.New(ctx, c, cfg.Namespace, dep), cfg.Plan.Import, manifest.Data[names.ManifestKey], ops)
	if err != nil {
		return nil, nil, err
	}
	if len(imported) > 0 {
		cfg.progress(manifest, ReasonVariablesImported, "imported into the config server from their Secrets: %s", strings.Join(imported, ", "))
	}
	return server, accepted, nil
}

// importSecrets imports the variables of names from their Secrets into the
// server where it has none, each of the type the manifest declares it
// with, else of its value's shape; it returns those it imported.
func importSecrets(server *director.Source, secrets *kubevars.Source, names []string, manifestYAML []byte, ops []deployment.OpsFile) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	doc, err := deployment.Document(manifestYAML, ops)
	if err != nil {
		return nil, err
	}
	defs, err := manifest.VariablesOf(doc)
	if err != nil {
		return nil, err
	}
	declared := map[string]string{}
	for _, d := range defs {
		declared[d.Name] = d.Type
	}
	var imported []string
	for _, name := range names {
		v, found, err := secrets.Get(name)
		if err != nil || !found {
			return imported, err
		}
		typ := cmp.Or(declared[name], kubevars.TypeOf(v))
		ok, err := server.Import(name, typ, v)
		if err != nil {
			return imported, err
		}
		if ok {
			imported = append(imported, name)
		}
	}
	return imported, nil
}

// acceptedSet reads the accepted variable set the plan names, nil when it
// names none.
func acceptedSet(ctx context.Context, c client.Client, namespace, name string) (*corev1.Secret, error) {
	if name == "" {
		return nil, nil
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("reading the accepted variable set %s: %w", name, err)
	}
	return &s, nil
}

// writeVariableSet records the ids the gathering used as the
// deployment's next variable set, reusing the accepted one when they are
// the same.
func writeVariableSet(ctx context.Context, c client.Client, cfg Config, deployment string, set map[string]string, accepted *corev1.Secret, owner *metav1.OwnerReference) (*trust.WrittenLink, error) {
	data, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	key := versions.Key{Namespace: cfg.Namespace, Deployment: deployment, Kind: names.KindVariableSet, InstanceGroup: names.VariableSetSeries}
	existing := versions.Stored{}
	if accepted != nil {
		existing.Add(accepted)
	}
	_, series, err := versions.WriteOver(ctx, c, versions.Desired{Key: key, Data: map[string][]byte{names.VariableSetKey: data}, Owner: owner,
		Above: cfg.Plan.Above[Series(names.KindVariableSet, names.VariableSetSeries)]}, existing.Of(key))
	if err != nil {
		return nil, err
	}
	w := trust.WrittenLinkOf(series[len(series)-1].Secret)
	return &w, nil
}

// writeGroup writes the resolved properties and BPM info of one group over
// its accepted version, above every stored number (above, by Series).
func writeGroup(ctx context.Context, c client.Client, stored versions.Stored, above map[string]int, key versions.Key, resolvedData []byte, info bpm.Info, owner *metav1.OwnerReference) (GroupResult, error) {
	ig := key.InstanceGroup
	rkey, bkey := key, key
	rkey.Kind, bkey.Kind = names.KindResolved, names.KindBPM
	rres, rseries, err := versions.WriteOver(ctx, c, versions.Desired{Key: rkey, Data: map[string][]byte{resolved.Key: resolvedData}, Owner: owner,
		Above: above[Series(rkey.Kind, names.LabelValue(ig))]}, stored.Of(rkey))
	if err != nil {
		return GroupResult{}, err
	}
	// The BPM info names its resolved version, so a new resolved version
	// always makes a new BPM version and the webhook mounts it.
	info.ResolvedSecret = rres.Name
	enc, err := secretdata.Encode(info)
	if err != nil {
		return GroupResult{}, fmt.Errorf("instance group '%s': BPM info is %w", ig, err)
	}
	bres, bseries, err := versions.WriteOver(ctx, c, versions.Desired{Key: bkey, Data: map[string][]byte{bpm.InfoKey: enc}, Owner: owner,
		Labels: map[string]string{names.LabelResolvedVersion: strconv.Itoa(rres.Number)},
		Above:  above[Series(bkey.Kind, names.LabelValue(ig))]}, stored.Of(bkey))
	if err != nil {
		return GroupResult{}, err
	}
	return GroupResult{InstanceGroup: ig, Resolved: rres, BPM: bres,
		written: trust.WrittenOf(versions.Latest(bseries).Secret, versions.Latest(rseries).Secret)}, nil
}

// bpmInfo is what the webhook needs of group g.
func bpmInfo(m *manifest.Manifest, g *deployment.Group, instances []bpm.InstanceBPM) (bpm.Info, error) {
	info := bpm.Info{
		Deployment:       m.Name,
		InstanceGroup:    g.Manifest.Name,
		Instances:        g.Manifest.Instances,
		AZs:              g.Manifest.AZs,
		Lifecycle:        g.Manifest.Lifecycle,
		PersistentDiskMB: g.Manifest.PersistentDisk,
		BPM:              instances,
	}
	// An errand's Job has no claims: objects warns its named disks are
	// not mapped, and its pods are not denied for lacking them.
	for _, d := range g.Manifest.PersistentDisks {
		if g.Manifest.Lifecycle != "errand" {
			info.NamedDisks = append(info.NamedDisks, d.Name)
		}
	}
	seen := map[string]bool{}
	for _, j := range g.Jobs {
		job := bpm.Job{Name: j.Name, Release: j.Release}
		for _, t := range j.Spec.Templates {
			if script, ok := strings.CutPrefix(t.Destination, "bin/"); ok && slices.Contains(lifecycleScripts, script) {
				job.Scripts = append(job.Scripts, script)
			}
		}
		if slices.Contains(job.Scripts, "pre-start") {
			job.Packages = j.Spec.Packages
		}
		for _, ib := range instances {
			for _, p := range ib.Jobs[j.Name].Processes {
				job.PersistentDisk = job.PersistentDisk || p.PersistentDisk
			}
		}
		info.Jobs = append(info.Jobs, job)
		if seen[j.Release] {
			continue
		}
		seen[j.Release] = true
		image, err := m.ReleaseImage(j.Release)
		if err != nil {
			return info, err
		}
		info.Releases = append(info.Releases, bpm.Release{Name: j.Release, Version: j.ReleaseVersion, Image: image})
	}
	if !g.Manifest.HasStoreDisk() && info.StoresData() {
		info.EphemeralStore, info.EphemeralDiskMB = true, g.Manifest.EphemeralDiskMB()
	}
	return info, nil
}

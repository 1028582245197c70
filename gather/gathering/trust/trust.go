// Package trust is the webhook's trust anchor: the record, in the
// operator's own namespace, of the versioned Secrets the operator's
// gatherings wrote for a deployment. Anyone who may create Secrets in a
// deployment's namespace can create one carrying its labels; nobody but
// the operator may write its namespace, so the webhook injects only what a
// record names, by UID (assigned by the apiserver, immutable) and content
// digest.
package trust

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Key is the record ConfigMap's key holding the Record as JSON.
const Key = "accepted.json"

// LabelNamespace on a record names the namespace of the deployment it
// covers; records also carry the deployment label and LabelManagedBy.
const LabelNamespace = names.Prefix + "accepted-namespace"

// OwnerName is the ConfigMap the chart installs in the operator's
// namespace to own every record: uninstalling the chart deletes it, and the
// garbage collector the records with it.
const OwnerName = "bosh-injector-records"

// Name is the record ConfigMap of a deployment of namespace, in the
// operator's namespace.
func Name(namespace, deployment string) string {
	return "accepted." + namespace + "." + names.DNS1123Label(deployment)
}

// Record lists the accepted versions of a deployment's instance groups.
type Record struct {
	Namespace  string `json:"namespace"`
	Deployment string `json:"deployment"`
	// Job is the UID of the gathering Job whose result was accepted last:
	// a Job's result is accepted once, when the runner first sees it
	// complete, so a Secret forged later is never taken for its result.
	Job types.UID `json:"job"`
	// Groups by the group's label value.
	Groups map[string]Group `json:"groups"`
	// Jobs are the gathering Jobs the runner created, newest last: only
	// their pods' reports are accepted, never those of a Job of the same
	// name someone else created.
	Jobs []JobRef `json:"jobs,omitempty"`
	// Links are the deployment's shared links as its last accepted
	// gathering left them, by the link's label value: what consuming
	// deployments' gatherings read.
	Links map[string]Ref `json:"links,omitempty"`
	// VariableSet is the variable set of the last accepted gathering that
	// used a config server, and Digest the inputs digest of that
	// gathering's Job: a gathering of the same inputs reads at its ids.
	VariableSet *Ref   `json:"variableSet,omitempty"`
	Digest      string `json:"digest,omitempty"`
}

// JobRef identifies a gathering Job the runner created.
type JobRef struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// keepJobs is how many created Jobs a record remembers: the runner
// removes older Jobs once a newer one succeeded.
const keepJobs = 8

// Created says whether the runner created job.
func (r *Record) Created(name string, uid types.UID) bool {
	return r != nil && slices.Contains(r.Jobs, JobRef{Name: name, UID: uid})
}

// RecordJob records that the runner created gathering Job name with uid.
// A Job it failed to record would be taken for someone else's: a conflict
// is retried.
func RecordJob(ctx context.Context, c client.Client, trustNamespace, namespace, deployment, name string, uid types.UID) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rec, err := Read(ctx, c, trustNamespace, namespace, deployment)
		if err != nil {
			return err
		}
		if rec == nil {
			rec = &Record{Namespace: namespace, Deployment: deployment, Groups: map[string]Group{}}
		}
		rec.Jobs = append(slices.DeleteFunc(rec.Jobs, func(j JobRef) bool { return j.Name == name }), JobRef{Name: name, UID: uid})
		if len(rec.Jobs) > keepJobs {
			rec.Jobs = rec.Jobs[len(rec.Jobs)-keepJobs:]
		}
		return write(ctx, c, trustNamespace, rec)
	})
}

// Group is the accepted versions of an instance group, oldest first.
type Group struct {
	// Name is the group's BOSH name.
	Name     string    `json:"name"`
	Versions []Version `json:"versions"`
}

// Version is one accepted BPM info and the resolved properties it names.
type Version struct {
	BPM      Ref `json:"bpm"`
	Resolved Ref `json:"resolved"`
}

// Ref identifies one Secret as it was accepted.
type Ref struct {
	Name    string    `json:"name"`
	UID     types.UID `json:"uid"`
	Version int       `json:"version"`
	SHA256  string    `json:"sha256"`
}

func refOf(s *corev1.Secret) Ref {
	return Ref{Name: s.Name, UID: s.UID, Version: versions.Number(s), SHA256: secretdata.Digest(s.Data)}
}

// Matches says whether s is the Secret r accepted: the same object (UID)
// with the same content.
func (r Ref) Matches(s *corev1.Secret) bool {
	return s.UID == r.UID && s.Name == r.Name && secretdata.Digest(s.Data) == r.SHA256
}

// Latest is a group's newest accepted version, nil when it has none.
func (g Group) Latest() *Version {
	if len(g.Versions) == 0 {
		return nil
	}
	return &g.Versions[len(g.Versions)-1]
}

// Pinned is the newest accepted version of a group whose resolved
// properties are version resolved, nil when none is.
func (g Group) Pinned(resolved int) *Version {
	for i := len(g.Versions) - 1; i >= 0; i-- {
		if g.Versions[i].Resolved.Version == resolved {
			return &g.Versions[i]
		}
	}
	return nil
}

// Read returns the record of a deployment, nil when there is none.
func Read(ctx context.Context, c client.Reader, trustNamespace, namespace, deployment string) (*Record, error) {
	cm, err := get(ctx, c, trustNamespace, namespace, deployment)
	if cm == nil || err != nil {
		return nil, err
	}
	return decode(cm)
}

func get(ctx context.Context, c client.Reader, trustNamespace, namespace, deployment string) (*corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	// Only read: a cache need not copy it.
	err := c.Get(ctx, client.ObjectKey{Namespace: trustNamespace, Name: Name(namespace, deployment)}, &cm, client.UnsafeDisableDeepCopy)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the accepted versions of deployment '%s': %w", deployment, err)
	}
	return &cm, nil
}

func decode(cm *corev1.ConfigMap) (*Record, error) {
	var rec Record
	if err := json.Unmarshal([]byte(cm.Data[Key]), &rec); err != nil {
		return nil, fmt.Errorf("record %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return &rec, nil
}

// Records reads records as Read does, decoding each version of a record's
// ConfigMap once: the webhook reads one at every admission. The records it
// returns are shared: read-only.
type Records struct{ m sync.Map }

// recordVersion is a record decoded from a version of its ConfigMap.
type recordVersion struct {
	uid             types.UID
	resourceVersion string
	rec             *Record
}

// Read is the package's Read through the cache of decoded records.
func (r *Records) Read(ctx context.Context, c client.Reader, trustNamespace, namespace, deployment string) (*Record, error) {
	cm, err := get(ctx, c, trustNamespace, namespace, deployment)
	if cm == nil || err != nil {
		return nil, err
	}
	if v, ok := r.m.Load(cm.Name); ok && v.(recordVersion).uid == cm.UID && v.(recordVersion).resourceVersion == cm.ResourceVersion {
		return v.(recordVersion).rec, nil
	}
	rec, err := decode(cm)
	if err == nil {
		// By name: a deployment has one entry, its record's latest.
		r.m.Store(cm.Name, recordVersion{uid: cm.UID, resourceVersion: cm.ResourceVersion, rec: rec})
	}
	return rec, err
}

// Written is what a gathering left as each instance group's latest BPM
// and resolved versions, by the group's label value. The gathering's pod
// reports it in its termination message, which only the kubelet writes:
// the runner accepts exactly these Secrets with this content, so a Secret
// created, or created again with other data, while the gathering finishes
// is never taken for its result.
type Written map[string]WrittenGroup

// WrittenGroup identifies the two Secrets of a group's version as the
// gathering wrote or reused them: their numbers and content. Not their
// UIDs: a Secret created again with the same data is as good (the record
// takes the UIDs at acceptance), and without them a report of 60 groups
// fits a termination message.
type WrittenGroup struct {
	BPM, Resolved int
	// SHA256 is reportDigest of both Secrets.
	SHA256 string
}

// WrittenOf is what a gathering reports of a group's BPM and resolved
// Secrets.
func WrittenOf(bpmSecret, resolvedSecret *corev1.Secret) WrittenGroup {
	return WrittenGroup{BPM: versions.Number(bpmSecret), Resolved: versions.Number(resolvedSecret), SHA256: reportDigest(bpmSecret, resolvedSecret)}
}

// reportDigest covers the data of a report entry's Secrets (a group's two,
// a link's one) in one digest, truncated to 128 bits: a termination message
// holds 4096 bytes, and the report names every group and link.
func reportDigest(secrets ...*corev1.Secret) string {
	var digests []string
	for _, s := range secrets {
		digests = append(digests, secretdata.Digest(s.Data))
	}
	sum := sha256.Sum256([]byte(strings.Join(digests, " ")))
	return hex.EncodeToString(sum[:16])
}

// MarshalJSON writes g as a compact array, for the same 4096 bytes.
func (g WrittenGroup) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{g.BPM, g.Resolved, g.SHA256})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (g *WrittenGroup) UnmarshalJSON(data []byte) error {
	return unmarshalArray(data, "a group's report", &g.BPM, &g.Resolved, &g.SHA256)
}

// unmarshalArray reads the JSON array data into fields, one element each.
func unmarshalArray(data []byte, what string, fields ...any) error {
	var a []json.RawMessage
	if err := json.Unmarshal(data, &a); err != nil {
		return err
	}
	if len(a) != len(fields) {
		return fmt.Errorf("%s has %d fields, not %d", what, len(a), len(fields))
	}
	for i, v := range fields {
		if err := json.Unmarshal(a[i], v); err != nil {
			return err
		}
	}
	return nil
}

// maxReport is the size of a termination message.
const maxReport = 4096

// Report is a successful gathering's termination message: the versions it
// left per group, and the link Secrets the deployment shares now, by link
// label (the runner deletes every version of the other links: a link no
// longer shared must not keep resolving for its consumers).
type Report struct {
	Groups Written                `json:"groups"`
	Links  map[string]WrittenLink `json:"links,omitempty"`
	// VariableSet is the variable set the gathering wrote or reused, with
	// a config server.
	VariableSet *WrittenLink `json:"variableSet,omitempty"`
}

// WrittenLink identifies the Secret of a shared link as the gathering
// wrote or reused it.
type WrittenLink struct {
	Version int
	// SHA256 is reportDigest of the Secret.
	SHA256 string
}

// WrittenLinkOf is what a gathering reports of a shared link's Secret.
func WrittenLinkOf(s *corev1.Secret) WrittenLink {
	return WrittenLink{Version: versions.Number(s), SHA256: reportDigest(s)}
}

// MarshalJSON writes l as a compact array, for the termination message.
func (l WrittenLink) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{l.Version, l.SHA256})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (l *WrittenLink) UnmarshalJSON(data []byte) error {
	return unmarshalArray(data, "a link's report", &l.Version, &l.SHA256)
}

// Encode is r as the gathering's termination message; a report that does
// not fit is an error, never truncated.
func (r Report) Encode() (string, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	if len(data) > maxReport {
		return "", fmt.Errorf("the report of %d instance groups and %d links takes %d bytes, more than a termination message's %d", len(r.Groups), len(r.Links), len(data), maxReport)
	}
	return string(data), nil
}

// ParseReport reads a gathering's termination message.
func ParseReport(message string) (Report, error) {
	var r Report
	if err := json.Unmarshal([]byte(message), &r); err != nil {
		return Report{}, fmt.Errorf("the gathering's report %q: %w", message, err)
	}
	return r, nil
}

// Accept records, after gathering Job job succeeded, the versions it
// reports as written, and keeps the versions accepted earlier whose Secrets
// are still as accepted, and the links recorded. A job already accepted
// adds nothing. A reported version is not accepted when its Secrets are
// gone, hold other data than the report says, are not immutable, or when
// its BPM info names another resolved Secret: it returns, besides the
// record, why for each such group.
func Accept(ctx context.Context, c client.Client, trustNamespace, namespace, deployment string, job types.UID, written Written) (*Record, []string, error) {
	rec, _, refused, err := accepted(ctx, c, trustNamespace, namespace, deployment, job, written)
	if err != nil {
		return nil, nil, err
	}
	return rec, refused, write(ctx, c, trustNamespace, rec)
}

// AcceptReport accepts a gathering's report: its groups as Accept does and,
// when it reports groups, the links it shares in place of those recorded
// (a link whose Secret does not hold the reported content, or is mutable,
// is not recorded, and why is returned). It lists the deployment's Secrets
// once and writes the record once, and returns that list with the record:
// a consistent list after a write waits for the API server's cache to
// catch up with it.
func AcceptReport(ctx context.Context, c client.Client, trustNamespace, namespace, deployment string, job types.UID, digest string, report Report) (*Record, versions.Stored, []string, error) {
	rec, stored, refused, err := accepted(ctx, c, trustNamespace, namespace, deployment, job, report.Groups)
	if err != nil {
		return nil, nil, nil, err
	}
	if report.Groups != nil {
		var refusedLinks []string
		rec.Links, refusedLinks = sharedLinks(stored, report.Links)
		refused = append(refused, refusedLinks...)
	}
	if report.VariableSet != nil {
		ref, err := reportedSecret(stored, names.KindVariableSet, names.VariableSetSeries, *report.VariableSet)
		if err != nil {
			refused = append(refused, "the variable set: "+err.Error())
		} else {
			rec.VariableSet, rec.Digest = &ref, digest
		}
	}
	return rec, stored, refused, write(ctx, c, trustNamespace, rec)
}

// accepted is the record Accept writes, with the deployment's Secrets it
// was checked against.
func accepted(ctx context.Context, c client.Client, trustNamespace, namespace, deployment string, job types.UID, written Written) (*Record, versions.Stored, []string, error) {
	old, err := Read(ctx, c, trustNamespace, namespace, deployment)
	if err != nil {
		return nil, nil, nil, err
	}
	stored, err := versions.ListDeployment(ctx, c, namespace, deployment)
	if err != nil {
		return nil, nil, nil, err
	}
	rec := &Record{Namespace: namespace, Deployment: deployment, Job: job, Groups: map[string]Group{}}
	if old != nil {
		rec.Jobs, rec.Links, rec.VariableSet, rec.Digest = old.Jobs, old.Links, old.VariableSet, old.Digest
		// Earlier versions stay accepted while their Secrets are intact:
		// pods of older template revisions are injected from them.
		for label, g := range old.Groups {
			kept := Group{Name: g.Name}
			for _, v := range g.Versions {
				if intact(stored, label, v) {
					kept.Versions = append(kept.Versions, v)
				}
			}
			if len(kept.Versions) > 0 {
				rec.Groups[label] = kept
			}
		}
	}
	var refused []string
	if old == nil || old.Job != job {
		for _, label := range slices.Sorted(maps.Keys(written)) {
			v, name, err := reported(stored, label, written[label])
			if err != nil {
				refused = append(refused, fmt.Sprintf("instance group '%s': %s", label, err))
				continue
			}
			g := rec.Groups[label]
			g.Name = name
			if !slices.Contains(g.Versions, *v) {
				g.Versions = append(g.Versions, *v)
			}
			rec.Groups[label] = g
		}
	}
	return rec, stored, refused, nil
}

// sharedLinks are the links of a report whose Secrets in stored are those
// it reports, and why each other one is not.
func sharedLinks(stored versions.Stored, links map[string]WrittenLink) (map[string]Ref, []string) {
	shared := map[string]Ref{}
	var refused []string
	for _, label := range slices.Sorted(maps.Keys(links)) {
		ref, err := reportedSecret(stored, names.KindLink, label, links[label])
		if err != nil {
			refused = append(refused, fmt.Sprintf("link '%s': %s", label, err))
			continue
		}
		shared[label] = ref
	}
	return shared, refused
}

// reportedSecret is the Secret of series kind/label that a report
// identifies, when it is that one and immutable.
func reportedSecret(stored versions.Stored, kind, label string, l WrittenLink) (Ref, error) {
	series := stored.Of(versions.Key{Kind: kind, InstanceGroup: label})
	i := slices.IndexFunc(series, func(v versions.Version) bool { return v.Number == l.Version })
	if i < 0 {
		return Ref{}, fmt.Errorf("its Secret of version %d is gone", l.Version)
	}
	s := series[i].Secret
	switch {
	case reportDigest(s) != l.SHA256:
		return Ref{}, fmt.Errorf("Secret %s is not the one the gathering wrote", s.Name)
	case s.Immutable == nil || !*s.Immutable:
		return Ref{}, fmt.Errorf("Secret %s is not immutable", s.Name)
	}
	return refOf(s), nil
}

// reported is the version of a group a gathering reported as written, when
// its Secrets are exactly those the report identifies and the BPM info
// names that resolved Secret, and the group's BOSH name.
func reported(stored versions.Stored, label string, w WrittenGroup) (*Version, string, error) {
	find := func(kind string, n int) (*corev1.Secret, error) {
		for _, v := range stored.Of(versions.Key{Kind: kind, InstanceGroup: label}) {
			switch {
			case v.Number != n:
				continue
			case v.Secret.Immutable == nil || !*v.Secret.Immutable:
				return nil, fmt.Errorf("Secret %s is not immutable", v.Secret.Name)
			}
			return v.Secret, nil
		}
		return nil, fmt.Errorf("the %s Secret of version %d is gone", kind, n)
	}
	b, err := find(names.KindBPM, w.BPM)
	if err != nil {
		return nil, "", err
	}
	r, err := find(names.KindResolved, w.Resolved)
	if err != nil {
		return nil, "", err
	}
	if reportDigest(b, r) != w.SHA256 {
		return nil, "", fmt.Errorf("Secrets %s and %s do not hold what the gathering wrote (they were changed, or deleted and created again)", b.Name, r.Name)
	}
	var info bpm.Info
	if err := secretdata.Decode(b.Data[bpm.InfoKey], &info); err != nil || info.ResolvedSecret != r.Name {
		return nil, "", fmt.Errorf("Secret %s does not name %s", b.Name, r.Name)
	}
	return &Version{BPM: refOf(b), Resolved: refOf(r)}, cmp.Or(info.InstanceGroup, label), nil
}

func intact(stored versions.Stored, label string, v Version) bool {
	has := func(kind string, r Ref) bool {
		return slices.ContainsFunc(stored.Of(versions.Key{Kind: kind, InstanceGroup: label}), func(s versions.Version) bool { return r.Matches(s.Secret) })
	}
	return has(names.KindBPM, v.BPM) && has(names.KindResolved, v.Resolved)
}

// write creates or updates the record's ConfigMap when its content changed.
func write(ctx context.Context, c client.Client, trustNamespace string, rec *Record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: Name(rec.Namespace, rec.Deployment), Namespace: trustNamespace,
		Labels: map[string]string{
			names.LabelManagedBy:  names.ManagedBy,
			names.LabelDeployment: names.LabelValue(rec.Deployment),
			LabelNamespace:        rec.Namespace,
		},
		Annotations: map[string]string{names.AnnotationDeploymentName: rec.Deployment},
	}, Data: map[string]string{Key: string(data)}}
	var owner corev1.ConfigMap
	switch err := c.Get(ctx, client.ObjectKey{Namespace: trustNamespace, Name: OwnerName}, &owner); {
	case err == nil:
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: OwnerName, UID: owner.UID}}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the records' owner %s/%s: %w", trustNamespace, OwnerName, err)
	}
	var have corev1.ConfigMap
	err = c.Get(ctx, client.ObjectKeyFromObject(cm), &have)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, cm); err != nil {
			return fmt.Errorf("recording the accepted versions of deployment '%s': %w", rec.Deployment, err)
		}
		return nil
	case err != nil:
		return err
	case bytes.Equal([]byte(have.Data[Key]), data) && slices.Equal(have.OwnerReferences, cm.OwnerReferences):
		return nil
	}
	cm.ResourceVersion = have.ResourceVersion
	if err := c.Update(ctx, cm); err != nil {
		return fmt.Errorf("recording the accepted versions of deployment '%s': %w", rec.Deployment, err)
	}
	return nil
}

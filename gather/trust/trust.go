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
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/versions"
)

// Key is the record ConfigMap's key holding the Record as JSON.
const Key = "accepted.json"

// LabelNamespace on a record names the namespace of the deployment it
// covers; records also carry the deployment label and LabelManagedBy.
const LabelNamespace = names.Prefix + "accepted-namespace"

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
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: trustNamespace, Name: Name(namespace, deployment)}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the accepted versions of deployment '%s': %w", deployment, err)
	}
	var rec Record
	if err := json.Unmarshal([]byte(cm.Data[Key]), &rec); err != nil {
		return nil, fmt.Errorf("record %s/%s: %w", trustNamespace, cm.Name, err)
	}
	return &rec, nil
}

// Written is what a gathering left as each instance group's latest BPM
// and resolved versions, by the group's label value. The gathering's pod
// reports it in its termination message, which only the kubelet writes:
// the runner accepts exactly these versions, so a Secret created while the
// gathering finishes is never taken for its result.
type Written map[string][2]int

// Report is w as the gathering's termination message.
func (w Written) Report() string {
	data, _ := json.Marshal(w)
	return string(data)
}

// ParseWritten reads a gathering's termination message.
func ParseWritten(message string) (Written, error) {
	var w Written
	if err := json.Unmarshal([]byte(message), &w); err != nil {
		return nil, fmt.Errorf("the gathering's report %q: %w", message, err)
	}
	return w, nil
}

// Accept records, after gathering Job job succeeded, the versions it
// reports as written, and keeps the versions accepted earlier whose Secrets
// are still as accepted. A job already accepted adds nothing. A reported
// version whose Secrets are gone, or whose BPM info names another resolved
// version, is not accepted. It returns the record.
func Accept(ctx context.Context, c client.Client, trustNamespace, namespace, deployment string, job types.UID, written Written) (*Record, error) {
	old, err := Read(ctx, c, trustNamespace, namespace, deployment)
	if err != nil {
		return nil, err
	}
	stored, err := versions.ListDeployment(ctx, c, namespace, deployment)
	if err != nil {
		return nil, err
	}
	rec := &Record{Namespace: namespace, Deployment: deployment, Job: job, Groups: map[string]Group{}}
	if old != nil {
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
	if old == nil || old.Job != job {
		for _, label := range slices.Sorted(maps.Keys(written)) {
			v, name, ok := reported(stored, label, written[label])
			if !ok {
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
	return rec, write(ctx, c, trustNamespace, rec)
}

// reported is the version of a group a gathering reported as written
// (BPM and resolved version numbers), when its Secrets exist and the BPM
// info names that resolved Secret, and the group's BOSH name.
func reported(stored versions.Stored, label string, numbers [2]int) (*Version, string, bool) {
	find := func(kind string, n int) *corev1.Secret {
		for _, v := range stored.Of(versions.Key{Kind: kind, InstanceGroup: label}) {
			if v.Number == n {
				return v.Secret
			}
		}
		return nil
	}
	b, r := find(names.KindBPM, numbers[0]), find(names.KindResolved, numbers[1])
	if b == nil || r == nil {
		return nil, "", false
	}
	var info bpm.Info
	if err := secretdata.Decode(b.Data[bpm.InfoKey], &info); err != nil || info.ResolvedSecret != r.Name {
		return nil, "", false
	}
	return &Version{BPM: refOf(b), Resolved: refOf(r)}, cmp.Or(info.InstanceGroup, label), true
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
	case bytes.Equal([]byte(have.Data[Key]), data):
		return nil
	}
	cm.ResourceVersion = have.ResourceVersion
	if err := c.Update(ctx, cm); err != nil {
		return fmt.Errorf("recording the accepted versions of deployment '%s': %w", rec.Deployment, err)
	}
	return nil
}

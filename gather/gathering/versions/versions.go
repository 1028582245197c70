// Package versions keeps the versioned, immutable per-instance-group Secrets
// of a deployment ("<deployment>.<kind>.<ig>-v<N>"): a new version is created
// only when the content differs from the latest one, and old versions are
// pruned except the newest few and any a pod still mounts.
package versions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Keep is how many of the newest versions pruning always keeps.
const Keep = 3

// Key identifies one series of versioned Secrets.
type Key struct {
	Namespace     string
	Deployment    string
	Kind          string // names.KindResolved or names.KindBPM
	InstanceGroup string
}

func (k Key) selector() client.MatchingLabels {
	return client.MatchingLabels{
		names.LabelDeployment:    names.LabelValue(k.Deployment),
		names.LabelInstanceGroup: names.LabelValue(k.InstanceGroup),
		names.LabelSecretKind:    k.Kind,
	}
}

// Version is one stored version.
type Version struct {
	Number int
	Secret *corev1.Secret
}

// List returns the stored versions of k, oldest first.
func List(ctx context.Context, c client.Reader, k Key) ([]Version, error) {
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(k.Namespace), k.selector()); err != nil {
		return nil, fmt.Errorf("listing %s Secrets of instance group %q: %w", k.Kind, k.InstanceGroup, err)
	}
	var out []Version
	for i := range list.Items {
		if n, ok := versionOf(&list.Items[i]); ok {
			out = append(out, Version{Number: n, Secret: &list.Items[i]})
		}
	}
	slices.SortFunc(out, func(a, b Version) int { return a.Number - b.Number })
	return out, nil
}

// Stored is every versioned Secret of a deployment by series, read in one
// List, so a gathering costs one read however many groups it has.
type Stored map[seriesOf][]Version

type seriesOf struct{ kind, group string }

// ListDeployment returns the stored versions of every series of a
// deployment.
func ListDeployment(ctx context.Context, c client.Reader, namespace, deployment string) (Stored, error) {
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{names.LabelDeployment: names.LabelValue(deployment)},
		client.HasLabels{names.LabelSecretKind, names.LabelInstanceGroup, names.LabelVersion}); err != nil {
		return nil, fmt.Errorf("listing the versioned Secrets of deployment %q: %w", deployment, err)
	}
	out := Stored{}
	for i := range list.Items {
		out.Add(&list.Items[i])
	}
	return out, nil
}

// Add adds a versioned Secret to its series, in order; a Secret without a
// version is not ours and is left out.
func (s Stored) Add(secret *corev1.Secret) {
	n, ok := versionOf(secret)
	if !ok {
		return
	}
	k := seriesOf{secret.Labels[names.LabelSecretKind], secret.Labels[names.LabelInstanceGroup]}
	at, _ := slices.BinarySearchFunc(s[k], n, func(v Version, n int) int { return v.Number - n })
	s[k] = slices.Insert(s[k], at, Version{Number: n, Secret: secret})
}

// Series are the stored series, each oldest first.
func (s Stored) Series() [][]Version {
	return slices.Collect(maps.Values(s))
}

// Of returns the stored versions of k, oldest first.
func (s Stored) Of(k Key) []Version {
	return s[seriesOf{k.Kind, names.LabelValue(k.InstanceGroup)}]
}

// versionOf reads a versioned Secret's version label; Secrets of a series
// whose label is not a positive number are not ours.
func versionOf(s *corev1.Secret) (int, bool) {
	n, err := strconv.Atoi(s.Labels[names.LabelVersion])
	return n, err == nil && n > 0
}

// Number is a versioned Secret's version, 0 when it has none.
func Number(s *corev1.Secret) int {
	n, _ := versionOf(s)
	return n
}

// Latest returns the newest version of k, or nil when there is none.
func Latest(versions []Version) *Version {
	if len(versions) == 0 {
		return nil
	}
	return &versions[len(versions)-1]
}

// Desired is the content of the next version of a series.
type Desired struct {
	Key
	Data map[string][]byte
	// Labels are set besides the series' own.
	Labels map[string]string
	// Owner, when set, owns the created Secret so it goes away with the
	// deployment.
	Owner *metav1.OwnerReference
	// Above is the highest version number stored in the series, whether
	// or not it is among the given versions: a new version goes above it,
	// so it never collides with a Secret the gathering may not read.
	Above int
}

// attempts bounds how many numbers WriteOver tries past versions created
// after Above was read.
const attempts = 64

// Result says which version holds the desired content.
type Result struct {
	Name    string
	Number  int
	Created bool
}

// Write stores d as a new version when its data differs from the latest
// version's, and returns the version that holds it either way.
func Write(ctx context.Context, c client.Client, d Desired) (Result, error) {
	existing, err := List(ctx, c, d.Key)
	if err != nil {
		return Result{}, err
	}
	res, _, err := WriteOver(ctx, c, d, existing)
	return res, err
}

// WriteOver is Write given the series' versions to build on (oldest first,
// as List or Stored.Of return them); it also returns the series after
// writing, the version holding d's content last. Unchanged content costs no
// API call. A number taken meanwhile is skipped.
func WriteOver(ctx context.Context, c client.Client, d Desired, existing []Version) (Result, []Version, error) {
	next := d.Above + 1
	if latest := Latest(existing); latest != nil {
		if sameData(latest.Secret.Data, d.Data) {
			return Result{Name: latest.Secret.Name, Number: latest.Number}, existing, nil
		}
		next = max(next, latest.Number+1)
	}
	for range attempts {
		secret, err := create(ctx, c, d, next)
		if apierrors.IsAlreadyExists(err) {
			next++
			continue
		}
		if err != nil {
			return Result{}, existing, err
		}
		return Result{Name: secret.Name, Number: next, Created: true},
			append(slices.Clip(existing), Version{Number: next, Secret: secret}), nil
	}
	return Result{}, existing, fmt.Errorf("creating a version of %s Secrets of instance group %q: versions %d to %d exist", d.Kind, d.InstanceGroup, next-attempts, next-1)
}

// create creates version next of d.
func create(ctx context.Context, c client.Client, d Desired, next int) (*corev1.Secret, error) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.VersionedSecret(d.Deployment, d.Kind, d.InstanceGroup, next),
			Namespace: d.Namespace,
			Labels: map[string]string{
				names.LabelDeployment:    names.LabelValue(d.Deployment),
				names.LabelInstanceGroup: names.LabelValue(d.InstanceGroup),
				names.LabelSecretKind:    d.Kind,
				names.LabelVersion:       strconv.Itoa(next),
			},
			Annotations: map[string]string{
				names.AnnotationDeploymentName:    d.Deployment,
				names.AnnotationInstanceGroupName: d.InstanceGroup,
			},
		},
		Immutable: new(true),
		Data:      d.Data,
	}
	for k, v := range d.Labels {
		if _, own := secret.Labels[k]; !own {
			secret.Labels[k] = v
		}
	}
	if d.Owner != nil {
		secret.OwnerReferences = []metav1.OwnerReference{*d.Owner}
	}
	if err := c.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("creating Secret %s: %w", secret.Name, err)
	}
	return secret, nil
}

func sameData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}

// Prune deletes, of each series (oldest first), the versions older than
// the newest Keep, except those in use: mounted by a pod of the deployment
// (a running instance still renders from its version until it is rolled),
// or named by the resolved-version annotation of a pod, a StatefulSet's
// pod template or one of its earlier template revisions (the webhook
// injects a revision's pods from it, also after `kubectl rollout undo`),
// with the BPM versions naming those. Pods, StatefulSets and their
// ControllerRevisions are listed once, and only when some series has
// versions to delete. It returns the names it deleted.
func Prune(ctx context.Context, c client.Client, namespace, deployment string, series ...[]Version) ([]string, error) {
	var old []Version
	for _, s := range series {
		if len(s) > Keep {
			old = append(old, s[:len(s)-Keep]...)
		}
	}
	if len(old) == 0 {
		return nil, nil
	}
	used, err := inUse(ctx, c, namespace, deployment)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, v := range old {
		l := v.Secret.Labels
		pinned := l[names.LabelResolvedVersion] != "" && used[resolvedOf(deployment, l[names.LabelInstanceGroup], l[names.LabelResolvedVersion])]
		if used[v.Secret.Name] || pinned {
			continue
		}
		if err := c.Delete(ctx, v.Secret); err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("deleting old version %s: %w", v.Secret.Name, err)
		}
		deleted = append(deleted, v.Secret.Name)
	}
	return deleted, nil
}

// resolvedOf is the name of a group's resolved Secret of version n.
func resolvedOf(deployment, group, n string) string {
	return names.SecretPrefix(deployment, names.KindResolved, group) + n
}

// inUse returns the Secret names the pods of a deployment mount as volumes
// and the resolved Secrets its pods, StatefulSet templates and their
// revisions pin. Users label pods with BOSH names as they are, so labels
// are compared after sanitizing, not selected on.
func inUse(ctx context.Context, c client.Reader, namespace, deployment string) (map[string]bool, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.HasLabels{names.LabelDeployment, names.LabelInstanceGroup}); err != nil {
		return nil, fmt.Errorf("listing pods of deployment %q: %w", deployment, err)
	}
	var sets appsv1.StatefulSetList
	if err := c.List(ctx, &sets, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing StatefulSets of deployment %q: %w", deployment, err)
	}
	var revisions appsv1.ControllerRevisionList
	if err := c.List(ctx, &revisions, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the StatefulSet revisions of deployment %q: %w", deployment, err)
	}
	used := map[string]bool{}
	pin := func(m metav1.ObjectMeta) {
		if names.LabelValue(m.Labels[names.LabelDeployment]) != names.LabelValue(deployment) {
			return
		}
		if n, ok := m.Annotations[names.AnnotationResolvedVersion]; ok {
			used[resolvedOf(deployment, m.Labels[names.LabelInstanceGroup], n)] = true
		}
	}
	for _, p := range pods.Items {
		if names.LabelValue(p.Labels[names.LabelDeployment]) != names.LabelValue(deployment) {
			continue
		}
		pin(p.ObjectMeta)
		for _, v := range p.Spec.Volumes {
			if v.Secret != nil {
				used[v.Secret.SecretName] = true
			}
		}
	}
	for _, s := range sets.Items {
		pin(s.Spec.Template.ObjectMeta)
	}
	for _, r := range revisions.Items {
		if m, ok := revisionTemplate(&r); ok {
			pin(m)
		}
	}
	return used, nil
}

// revisionTemplate is the pod template metadata a StatefulSet's
// ControllerRevision holds: the controller stores the template as the
// patch {"spec":{"template":{...}}} that restores it.
func revisionTemplate(r *appsv1.ControllerRevision) (metav1.ObjectMeta, bool) {
	var patch struct {
		Spec struct {
			Template struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(r.Data.Raw, &patch); err != nil {
		return metav1.ObjectMeta{}, false
	}
	return patch.Spec.Template.Metadata, true
}

// Package store keeps the config server's credentials as immutable
// Kubernetes Secrets in one namespace: one Secret per version, never
// changed after its creation, so what a reader got by id stays what it got.
//
// A version's Secret is named cred-<h>-<n>: h is a hash of the credential
// name (names are not valid object names) and n the version's number,
// 1, 2, 3… per credential. Labels carry h and the version's UUID (its id
// in the API), so one List finds a credential's versions and one finds an
// id; both survive restarts because they live in the Secrets.
//
// Concurrency. A writer lists the credential's versions, decides from the
// newest (the current one) whether and what to write, and creates version
// n+1 with create-only semantics. Two writers on two replicas racing on one
// name both try the same Secret name; the apiserver lets exactly one create
// it and answers the other AlreadyExists, and that one lists again and
// decides anew from the winner's version: an overwrite becomes version
// n+2 (both values kept, one current), a no-overwrite returns the winner's.
// So versions form one gap-free sequence per name, nothing written is lost,
// and exactly one version is current: the highest number not transitional.
//
// Transitional versions. A certificate version may be marked transitional
// (CredHub's CA rotation): the mark is a label, the one part of an
// immutable Secret that may change, so a version's data never does. At
// most one version of a credential carries it; the current (CredHub's
// "active") version is the newest without it.
//
// Names are case-insensitive, as CredHub's (its name_lowercase column):
// /A/b and /a/B are one credential, named as its first version was. Lists read
// from the apiserver (no cache), so a replica sees another's write at once.
package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the version Secrets.
const (
	prefix = "config-server.bosh-injector.io/"
	// LabelCredential is the hash of the credential name.
	LabelCredential = prefix + "credential"
	// LabelID is the version's UUID.
	LabelID = prefix + "id"
	// labelTransitional marks a transitional certificate version.
	labelTransitional = prefix + "transitional"

	// AnnotationName is the credential's name.
	AnnotationName         = prefix + "name"
	annotationType         = prefix + "type"
	annotationVersion      = prefix + "version"
	annotationCreated      = prefix + "created-at"
	annotationCredentialID = prefix + "credential-id"
	annotationCAName       = prefix + "ca-name"

	// KeyValue holds the version's value, as JSON.
	KeyValue      = "value"
	keyMetadata   = "metadata"
	keyParameters = "parameters"
	keyTrustedCA  = "trusted-ca"
)

// maxAttempts bounds a write's retries when other writers keep winning.
const maxAttempts = 50

// Version is one version of a credential.
type Version struct {
	// ID is the version's UUID.
	ID string
	// CredentialID is the credential's UUID, shared by its versions (the
	// certificates endpoint's id).
	CredentialID string
	Name         string
	Type         string
	Number       int
	Created      time.Time
	// Value is the value's JSON: a string or an object, per type.
	Value json.RawMessage
	// Metadata is the request's metadata JSON, if any.
	Metadata json.RawMessage
	// Parameters are the generation parameters' JSON; empty for a value
	// that was set rather than generated.
	Parameters json.RawMessage
	// CAName is the CA credential a generated certificate was signed by.
	CAName string
	// Transitional marks a certificate version of a CA being rotated.
	Transitional bool
	// TrustedCA is the PEM of its CA's other version (transitional, or
	// active beside a transitional signer) that a certificate's users
	// trust besides its signer's while the CA rotates.
	TrustedCA string
}

// Store reads and writes versions in Namespace.
type Store struct {
	// Client must read from the apiserver, not from a cache.
	Client    client.Client
	Namespace string
}

// Hash is the label value standing for a credential name, in any case.
func Hash(name string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(name)))
	return hex.EncodeToString(sum[:16])
}

// Versions returns name's versions, newest first.
func (s *Store) Versions(ctx context.Context, name string) ([]Version, error) {
	vs, err := s.list(ctx, client.MatchingLabels{LabelCredential: Hash(name)})
	if err != nil {
		return nil, err
	}
	// A hash collision would mix names; the annotation says whose it is.
	return newestFirst(slices.DeleteFunc(vs, func(v Version) bool { return !strings.EqualFold(v.Name, name) })), nil
}

// Current returns name's current version, nil when there is none.
func (s *Store) Current(ctx context.Context, name string) (*Version, error) {
	vs, err := s.Versions(ctx, name)
	if err != nil {
		return nil, err
	}
	return Active(vs), nil
}

// Active is the current version of versions (newest first): the newest
// not transitional, else the newest; nil when there is none.
func Active(versions []Version) *Version {
	for i := range versions {
		if !versions[i].Transitional {
			return &versions[i]
		}
	}
	if len(versions) == 0 {
		return nil
	}
	return &versions[0]
}

// Transitional is the transitional version of versions, nil when none is.
func Transitional(versions []Version) *Version {
	for i := range versions {
		if versions[i].Transitional {
			return &versions[i]
		}
	}
	return nil
}

// Currents are what CredHub answers for current=true: the current
// version, then the transitional one if it is another.
func Currents(versions []Version) []Version {
	var out []Version
	if a := Active(versions); a != nil {
		out = append(out, *a)
		if t := Transitional(versions); t != nil && t.ID != a.ID {
			out = append(out, *t)
		}
	}
	return out
}

// OfCredential returns the versions of the credential with credentialID
// (the certificates endpoint's id), newest first; none when it is unknown.
func (s *Store) OfCredential(ctx context.Context, credentialID string) ([]Version, error) {
	vs, err := s.every(ctx)
	if err != nil {
		return nil, err
	}
	return newestFirst(slices.DeleteFunc(vs, func(v Version) bool { return v.CredentialID != credentialID })), nil
}

// newestFirst sorts one credential's versions, newest first.
func newestFirst(vs []Version) []Version {
	slices.SortFunc(vs, func(a, b Version) int { return cmp.Compare(b.Number, a.Number) })
	return vs
}

// SetTransitional makes the version with id, of name, its transitional
// one, clearing the mark of any other; an empty id only clears it.
func (s *Store) SetTransitional(ctx context.Context, name, id string) error {
	vs, err := s.Versions(ctx, name)
	if err != nil {
		return err
	}
	// Mark first, then clear: a reader in between sees two marks for a
	// moment, never a CA without the version being rotated to.
	for _, v := range vs {
		if v.ID == id && !v.Transitional {
			if err := s.mark(ctx, v, true); err != nil {
				return err
			}
		}
	}
	for _, v := range vs {
		if v.ID != id && v.Transitional {
			if err := s.mark(ctx, v, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// mark sets or clears v's transitional label.
func (s *Store) mark(ctx context.Context, v Version, transitional bool) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: secretName(v)}}
	value := "null"
	if transitional {
		value = `"true"`
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+labelTransitional+`":`+value+`}}}`))
	if err := s.Client.Patch(ctx, sec, patch); err != nil {
		return fmt.Errorf("marking version %d of a credential: %w", v.Number, err)
	}
	return nil
}

// ByID returns the version with id, nil when there is none.
func (s *Store) ByID(ctx context.Context, id string) (*Version, error) {
	if uuid.Validate(id) != nil {
		return nil, nil
	}
	vs, err := s.list(ctx, client.MatchingLabels{LabelID: id})
	if err != nil || len(vs) == 0 {
		return nil, err
	}
	return &vs[0], nil
}

// ByIDs returns the versions of ids that exist, read in one List, by id.
func (s *Store) ByIDs(ctx context.Context, ids []string) (map[string]Version, error) {
	valid := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return uuid.Validate(id) != nil })
	out := map[string]Version{}
	if len(valid) == 0 {
		return out, nil
	}
	req, err := labels.NewRequirement(LabelID, selection.In, valid)
	if err != nil {
		return nil, err
	}
	vs, err := s.list(ctx, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)})
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		out[v.ID] = v
	}
	return out, nil
}

// All returns the newest version of every credential, newest first.
func (s *Store) All(ctx context.Context) ([]Version, error) {
	vs, err := s.every(ctx)
	if err != nil {
		return nil, err
	}
	newest := map[string]Version{}
	for _, v := range vs {
		key := strings.ToLower(v.Name)
		if n, ok := newest[key]; !ok || v.Number > n.Number {
			newest[key] = v
		}
	}
	out := make([]Version, 0, len(newest))
	for _, v := range newest {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Version) int { return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.Name, b.Name)) })
	return out, nil
}

// every returns every version of every credential.
func (s *Store) every(ctx context.Context) ([]Version, error) {
	req, err := labels.NewRequirement(LabelCredential, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	return s.list(ctx, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)})
}

// Decide is a writer's choice given the current version (nil if none): the
// version to add (Name, Type, Value, Metadata, Parameters, CAName,
// Transitional, TrustedCA; the store fills the rest), or nil to keep
// current. It may run more than
// once, each time with the then current version.
type Decide func(current *Version) (*Version, error)

// Write adds the version decide asks for as name's new current version and
// returns it, or returns current when decide keeps it.
func (s *Store) Write(ctx context.Context, name string, decide Decide) (*Version, error) {
	for range maxAttempts {
		vs, err := s.Versions(ctx, name)
		if err != nil {
			return nil, err
		}
		current := Active(vs)
		next, err := decide(current)
		if err != nil || next == nil {
			return current, err
		}
		next.Name, next.ID, next.Number = name, uuid.NewString(), 1
		next.CredentialID = uuid.NewString()
		if len(vs) > 0 {
			next.Name, next.Number, next.CredentialID = vs[0].Name, vs[0].Number+1, vs[0].CredentialID
		}
		next.Created = time.Now().UTC().Truncate(time.Second)
		err = s.Client.Create(ctx, s.secret(next))
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating version %d of a credential: %w", next.Number, err)
		}
		return next, nil
	}
	return nil, errors.New("too many concurrent writers of one credential")
}

// Delete removes every version of name; false when there was none.
func (s *Store) Delete(ctx context.Context, name string) (bool, error) {
	vs, err := s.Versions(ctx, name)
	if err != nil || len(vs) == 0 {
		return false, err
	}
	for _, v := range vs {
		if err := s.DeleteVersion(ctx, v); err != nil {
			return false, err
		}
	}
	return true, nil
}

// DeleteVersion removes version v, gone already or not.
func (s *Store) DeleteVersion(ctx context.Context, v Version) error {
	err := s.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: secretName(v)}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting version %d of a credential: %w", v.Number, err)
	}
	return nil
}

func secretName(v Version) string { return "cred-" + Hash(v.Name) + "-" + strconv.Itoa(v.Number) }

func (s *Store) secret(v *Version) *corev1.Secret {
	immutable := true
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      secretName(*v),
			Labels:    map[string]string{LabelCredential: Hash(v.Name), LabelID: v.ID},
			Annotations: map[string]string{
				AnnotationName:         v.Name,
				annotationType:         v.Type,
				annotationVersion:      strconv.Itoa(v.Number),
				annotationCreated:      v.Created.Format(time.RFC3339),
				annotationCredentialID: v.CredentialID,
			},
		},
		Immutable: &immutable,
		Type:      corev1.SecretTypeOpaque,
		Data:      map[string][]byte{KeyValue: v.Value},
	}
	if v.CAName != "" {
		sec.Annotations[annotationCAName] = v.CAName
	}
	if v.Transitional {
		sec.Labels[labelTransitional] = "true"
	}
	if v.TrustedCA != "" {
		sec.Data[keyTrustedCA] = []byte(v.TrustedCA)
	}
	if len(v.Metadata) > 0 {
		sec.Data[keyMetadata] = v.Metadata
	}
	if len(v.Parameters) > 0 {
		sec.Data[keyParameters] = v.Parameters
	}
	return sec
}

// list returns the versions opts select.
func (s *Store) list(ctx context.Context, opts ...client.ListOption) ([]Version, error) {
	var secrets corev1.SecretList
	if err := s.Client.List(ctx, &secrets, append(opts, client.InNamespace(s.Namespace))...); err != nil {
		return nil, fmt.Errorf("listing credential versions: %w", err)
	}
	vs := make([]Version, 0, len(secrets.Items))
	for _, sec := range secrets.Items {
		a := sec.Annotations
		n, err := strconv.Atoi(a[annotationVersion])
		if err != nil || a[AnnotationName] == "" {
			continue // not a version this package wrote
		}
		created, _ := time.Parse(time.RFC3339, a[annotationCreated])
		vs = append(vs, Version{
			ID: sec.Labels[LabelID], CredentialID: a[annotationCredentialID],
			Name: a[AnnotationName], Type: a[annotationType], Number: n, Created: created,
			Value: sec.Data[KeyValue], Metadata: sec.Data[keyMetadata], Parameters: sec.Data[keyParameters],
			CAName: a[annotationCAName], Transitional: sec.Labels[labelTransitional] == "true",
			TrustedCA: string(sec.Data[keyTrustedCA]),
		})
	}
	return vs, nil
}

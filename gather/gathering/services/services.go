// Package services keeps the headless Services that give BOSH instances their
// addresses: one per instance ("<deployment>-<ig>-<index>", selecting the pod
// by its instance-index label) and one per instance group
// ("<deployment>-<ig>").
package services

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Desired is one Service of a deployment. Names come from the instance
// identity rules (gather/model/instance); Index is nil for a group Service.
type Desired struct {
	Name          string
	InstanceGroup string
	Index         *int
	// AZ, when set, selects the group's instances of that AZ; Healthy
	// selects only ready instances (`status: healthy`).
	AZ      string
	Healthy bool
	// AliasLabel, when set, makes the Service of a BOSH DNS alias over
	// several groups: it selects the pods carrying that label, which the
	// webhook puts on every target group's pods; AliasDomain is the alias.
	AliasLabel, AliasDomain string
}

// Build returns the Service for d. Services are headless and, except the
// healthy ones, publish pods before they are ready: BOSH jobs look up their
// peers (a cluster's other members) while starting, as on a director's DNS.
func Build(namespace, deployment string, d Desired) *corev1.Service {
	selector := map[string]string{
		names.LabelDeployment:    names.LabelValue(deployment),
		names.LabelInstanceGroup: names.LabelValue(d.InstanceGroup),
	}
	annotations := map[string]string{
		names.AnnotationDeploymentName:    deployment,
		names.AnnotationInstanceGroupName: d.InstanceGroup,
	}
	if d.AliasLabel != "" {
		delete(selector, names.LabelInstanceGroup)
		selector[d.AliasLabel] = "true"
		delete(annotations, names.AnnotationInstanceGroupName)
		annotations[names.AnnotationAlias] = d.AliasDomain
	}
	if d.Index != nil {
		selector[names.LabelInstanceIndex] = strconv.Itoa(*d.Index)
	}
	if d.AZ != "" {
		selector[names.LabelAZ] = names.LabelValue(d.AZ)
	}
	labels := maps.Clone(selector)
	delete(labels, names.LabelInstanceIndex)
	delete(labels, names.LabelAZ)
	delete(labels, d.AliasLabel)
	labels[names.LabelManagedBy] = names.ManagedBy
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:        d.Name,
			Namespace:   namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 selector,
			PublishNotReadyAddresses: !d.Healthy,
		},
	}
}

// Changes lists what Apply did.
type Changes struct {
	Created, Updated, Deleted []string
}

// Apply makes the deployment's managed Services in namespace exactly desired:
// missing ones are created, changed ones updated, and those of instances that
// no longer exist deleted. owner, when set, owns every Service so they go
// away with the deployment.
//
// The Services are listed from the API server's watch cache first: a
// consistent list waits for that cache to catch up with etcd (tens of
// milliseconds, most of an unchanged deployment's gathering). A write the
// cache's view was too old for (AlreadyExists, Conflict) makes Apply start
// again from a consistent list.
func Apply(ctx context.Context, c client.Client, namespace, deployment string, desired []Desired, owner *metav1.OwnerReference) (Changes, error) {
	ch, err := apply(ctx, c, namespace, deployment, desired, owner, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		more, err := apply(ctx, c, namespace, deployment, desired, owner, &client.ListOptions{})
		ch.Created, ch.Updated, ch.Deleted = append(ch.Created, more.Created...), append(ch.Updated, more.Updated...), append(ch.Deleted, more.Deleted...)
		return ch, err
	}
	return ch, err
}

// apply makes the Services desired from the view of them list gives; it
// returns the writes that were made, also when one failed.
func apply(ctx context.Context, c client.Client, namespace, deployment string, desired []Desired, owner *metav1.OwnerReference, from *client.ListOptions) (Changes, error) {
	var existing corev1.ServiceList
	if err := c.List(ctx, &existing, from, client.InNamespace(namespace), client.MatchingLabels{
		names.LabelDeployment: names.LabelValue(deployment),
		names.LabelManagedBy:  names.ManagedBy,
	}); err != nil {
		return Changes{}, fmt.Errorf("listing Services of deployment %q: %w", deployment, err)
	}
	current := map[string]*corev1.Service{}
	for i := range existing.Items {
		current[existing.Items[i].Name] = &existing.Items[i]
	}

	// Writes are decided first and then made concurrently: a group of a
	// thousand instances is a thousand Services.
	type write struct {
		name string
		kind func(*Changes) *[]string
		do   func(context.Context) error
	}
	created := func(ch *Changes) *[]string { return &ch.Created }
	updated := func(ch *Changes) *[]string { return &ch.Updated }
	deleted := func(ch *Changes) *[]string { return &ch.Deleted }
	var writes []write
	wanted := map[string]bool{}
	for _, d := range desired {
		want := Build(namespace, deployment, d)
		if owner != nil {
			want.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		wanted[want.Name] = true
		have, ok := current[want.Name]
		switch {
		case !ok:
			writes = append(writes, write{want.Name, created, func(ctx context.Context) error {
				if err := c.Create(ctx, want); err != nil {
					return fmt.Errorf("creating Service %s: %w", want.Name, err)
				}
				return nil
			}})
		case !upToDate(have, want):
			have.Labels, have.Annotations, have.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
			have.Spec.Selector, have.Spec.PublishNotReadyAddresses = want.Spec.Selector, want.Spec.PublishNotReadyAddresses
			writes = append(writes, write{want.Name, updated, func(ctx context.Context) error {
				if err := c.Update(ctx, have); err != nil {
					return fmt.Errorf("updating Service %s: %w", want.Name, err)
				}
				return nil
			}})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(current)) {
		if wanted[name] {
			continue
		}
		writes = append(writes, write{name, deleted, func(ctx context.Context) error {
			if err := c.Delete(ctx, current[name]); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting Service %s: %w", name, err)
			}
			return nil
		}})
	}
	// One failed write does not cancel the others: a cancelled request may
	// still be carried out, and then it would not be counted.
	made := make([]bool, len(writes))
	var g errgroup.Group
	g.SetLimit(Writers)
	for i, w := range writes {
		g.Go(func() error {
			if err := w.do(ctx); err != nil {
				return err
			}
			made[i] = true
			return nil
		})
	}
	err := g.Wait()
	var ch Changes
	for i, w := range writes {
		if made[i] {
			*w.kind(&ch) = append(*w.kind(&ch), w.name)
		}
	}
	return ch, err
}

// Writers bounds the API writes a gathering makes at once.
const Writers = 16

func upToDate(have, want *corev1.Service) bool {
	return maps.Equal(have.Labels, want.Labels) && maps.Equal(have.Annotations, want.Annotations) &&
		maps.Equal(have.Spec.Selector, want.Spec.Selector) && have.Spec.PublishNotReadyAddresses == want.Spec.PublishNotReadyAddresses &&
		slices.EqualFunc(have.OwnerReferences, want.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID })
}

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
// identity rules (gather/instance); Index is nil for a group Service.
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
func Apply(ctx context.Context, c client.Client, namespace, deployment string, desired []Desired, owner *metav1.OwnerReference) (Changes, error) {
	var existing corev1.ServiceList
	if err := c.List(ctx, &existing, client.InNamespace(namespace), client.MatchingLabels{
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
	var ch Changes
	var writes []func(context.Context) error
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
			writes = append(writes, func(ctx context.Context) error {
				if err := c.Create(ctx, want); err != nil {
					return fmt.Errorf("creating Service %s: %w", want.Name, err)
				}
				return nil
			})
			ch.Created = append(ch.Created, want.Name)
		case !upToDate(have, want):
			have.Labels, have.Annotations, have.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
			have.Spec.Selector, have.Spec.PublishNotReadyAddresses = want.Spec.Selector, want.Spec.PublishNotReadyAddresses
			writes = append(writes, func(ctx context.Context) error {
				if err := c.Update(ctx, have); err != nil {
					return fmt.Errorf("updating Service %s: %w", want.Name, err)
				}
				return nil
			})
			ch.Updated = append(ch.Updated, want.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(current)) {
		if wanted[name] {
			continue
		}
		writes = append(writes, func(ctx context.Context) error {
			if err := c.Delete(ctx, current[name]); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting Service %s: %w", name, err)
			}
			return nil
		})
		ch.Deleted = append(ch.Deleted, name)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Writers)
	for _, w := range writes {
		g.Go(func() error { return w(gctx) })
	}
	if err := g.Wait(); err != nil {
		return Changes{}, err
	}
	return ch, nil
}

// Writers bounds the API writes a gathering makes at once.
const Writers = 16

func upToDate(have, want *corev1.Service) bool {
	return maps.Equal(have.Labels, want.Labels) && maps.Equal(have.Annotations, want.Annotations) &&
		maps.Equal(have.Spec.Selector, want.Spec.Selector) && have.Spec.PublishNotReadyAddresses == want.Spec.PublishNotReadyAddresses &&
		slices.EqualFunc(have.OwnerReferences, want.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID })
}

package services_test

import (
	"context"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/bosh-injector/bosh-injector/gather/gathering/services"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

func instances(ig string, n int) []services.Desired {
	out := []services.Desired{{Name: "dep-" + ig, InstanceGroup: ig}}
	for i := range n {
		out = append(out, services.Desired{Name: "dep-" + ig + "-" + strconv.Itoa(i), InstanceGroup: ig, Index: new(i)})
	}
	return out
}

var _ = Describe("instance Services", func() {
	It("creates headless Services per instance and group, and removes those of instances gone", func() {
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "svc"}})).To(Succeed())
		owner := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "manifest", Namespace: "svc"}}
		Expect(cp.Client.Create(ctx, owner)).To(Succeed())
		ref := &metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: owner.Name, UID: owner.UID}

		ch, err := services.Apply(ctx, cp.Client, "svc", "dep", append(instances("web", 3), instances("db", 1)...), ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(ch.Created).To(ConsistOf("dep-web", "dep-web-0", "dep-web-1", "dep-web-2", "dep-db", "dep-db-0"))

		var svc corev1.Service
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: "svc", Name: "dep-web-1"}, &svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(svc.Spec.PublishNotReadyAddresses).To(BeTrue())
		Expect(svc.Spec.Selector).To(Equal(map[string]string{
			names.LabelDeployment: "dep", names.LabelInstanceGroup: "web", names.LabelInstanceIndex: "1"}))
		Expect(svc.OwnerReferences).To(ConsistOf(HaveField("UID", owner.UID)))

		again, err := services.Apply(ctx, cp.Client, "svc", "dep", append(instances("web", 3), instances("db", 1)...), ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(services.Changes{}))

		// Scaling web down to one instance removes the Services of 1 and 2;
		// a Service the user made is left alone.
		Expect(cp.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "users", Namespace: "svc", Labels: map[string]string{names.LabelDeployment: "dep"}},
			Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone},
		})).To(Succeed())
		ch, err = services.Apply(ctx, cp.Client, "svc", "dep", append(instances("web", 1), instances("db", 1)...), ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(ch.Deleted).To(ConsistOf("dep-web-1", "dep-web-2"))
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: "svc", Name: "users"}, &svc)).To(Succeed())
	})

	It("keeps the Service of an alias over several groups, selecting the alias label, and removes it with the alias", func() {
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alias"}})).To(Succeed())
		alias := services.Desired{Name: "dep-alias-0123456789", AliasLabel: names.LabelAliasPrefix + "0123456789", AliasDomain: "store.service.internal"}
		ch, err := services.Apply(ctx, cp.Client, "alias", "dep", append(instances("db", 1), alias), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(ch.Created).To(ContainElement(alias.Name))
		var svc corev1.Service
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: "alias", Name: alias.Name}, &svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(svc.Spec.Selector).To(Equal(map[string]string{names.LabelDeployment: "dep", alias.AliasLabel: "true"}))
		Expect(svc.Labels).To(Equal(map[string]string{names.LabelDeployment: "dep", names.LabelManagedBy: names.ManagedBy}))
		Expect(svc.Annotations).To(Equal(map[string]string{names.AnnotationDeploymentName: "dep", names.AnnotationAlias: "store.service.internal"}))

		ch, err = services.Apply(ctx, cp.Client, "alias", "dep", instances("db", 1), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(ch.Deleted).To(ConsistOf(alias.Name))
	})

	It("keeps the Services of link().address criteria: an AZ's instances, and only the ready ones for status healthy", func() {
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "criteria"}})).To(Succeed())
		_, err := services.Apply(ctx, cp.Client, "criteria", "dep", append(instances("web", 2),
			services.Desired{Name: "dep-web-healthy", InstanceGroup: "web", Healthy: true},
			services.Desired{Name: "dep-web-az-z1", InstanceGroup: "web", AZ: "z1"},
			services.Desired{Name: "dep-web-az-z1-healthy", InstanceGroup: "web", AZ: "z1", Healthy: true}), nil)
		Expect(err).NotTo(HaveOccurred())
		group := map[string]string{names.LabelDeployment: "dep", names.LabelInstanceGroup: "web"}
		inZ1 := map[string]string{names.LabelDeployment: "dep", names.LabelInstanceGroup: "web", names.LabelAZ: "z1"}
		for name, want := range map[string]struct {
			selector map[string]string
			notReady bool
		}{
			"dep-web":               {group, true},
			"dep-web-healthy":       {group, false},
			"dep-web-az-z1":         {inZ1, true},
			"dep-web-az-z1-healthy": {inZ1, false},
		} {
			var svc corev1.Service
			Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: "criteria", Name: name}, &svc)).To(Succeed())
			Expect(svc.Spec.Selector).To(Equal(want.selector), name)
			Expect(svc.Spec.PublishNotReadyAddresses).To(Equal(want.notReady), name)
			Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), name)
			// The AZ is the selector's only: the labels find the group's Services.
			Expect(svc.Labels).To(Equal(map[string]string{names.LabelDeployment: "dep", names.LabelInstanceGroup: "web", names.LabelManagedBy: names.ManagedBy}), name)
		}
	})
})

var _ = Describe("a stale view of the Services", func() {
	It("starts again from a consistent list when the watch cache's view was too old for a write", func() {
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "stale"}})).To(Succeed())
		_, err := services.Apply(ctx, cp.Client, "stale", "dep", instances("web", 2), nil)
		Expect(err).NotTo(HaveOccurred())

		// The cache's view misses every Service: the creates meet
		// AlreadyExists, and the consistent list that follows finds them.
		base, err := client.NewWithWatch(cp.Config, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		var cached, consistent int
		c := interceptor.NewClient(base, interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				var o client.ListOptions
				o.ApplyOptions(opts)
				if o.Raw != nil && o.Raw.ResourceVersion == "0" {
					cached++
					return nil
				}
				consistent++
				return c.List(ctx, list, opts...)
			},
		})
		ch, err := services.Apply(ctx, c, "stale", "dep", instances("web", 3), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(ch).To(Equal(services.Changes{Created: []string{"dep-web-2"}}))
		Expect([]int{cached, consistent}).To(Equal([]int{1, 1}))
	})
})

package configserver_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
)

var _ = Describe("the store", func() {
	It("keeps ids, versions and the signing key across a restart", func() {
		token := tokenFor(server.url, clientName, clientSecret)
		var ids []string
		for i := range 3 {
			a := call(server.url, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/restart/x", "type": "value", "value": fmt.Sprint(i)})
			Expect(a.status).To(Equal(http.StatusOK))
			ids = append(ids, a.json()["id"].(string))
		}
		before := call(server.url, http.MethodGet, "/api/v1/data?name=/restart/x", token, nil).body

		server.stop()
		server = start()

		// The old token still verifies: the key lives in a Secret.
		Expect(call(server.url, http.MethodGet, "/api/v1/data?name=/restart/x", token, nil).body).To(Equal(before))
		for i, id := range ids {
			Expect(call(server.url, http.MethodGet, "/api/v1/data/"+id, token, nil).json()["value"]).To(Equal(fmt.Sprint(i)))
		}
		// Versions read by their ids in one List; an id of none is left out.
		byID, err := (&store.Store{Client: cp.Client, Namespace: namespace}).ByIDs(ctx, append(slices.Clone(ids), "not-an-id", "00000000-0000-0000-0000-000000000000"))
		Expect(err).NotTo(HaveOccurred())
		Expect(byID).To(HaveLen(3))
		for i, id := range ids {
			Expect(byID[id].Name).To(Equal("/restart/x"))
			Expect(byID[id].Number).To(Equal(i + 1))
		}
		// Each version is an immutable Secret.
		var secrets corev1.SecretList
		Expect(cp.Client.List(ctx, &secrets, client.InNamespace(namespace), client.MatchingLabels{store.LabelCredential: store.Hash("/restart/x")})).To(Succeed())
		Expect(secrets.Items).To(HaveLen(3))
		for _, s := range secrets.Items {
			Expect(s.Immutable).To(HaveValue(BeTrue()))
		}
	})

	It("loses nothing when two servers write one name at once, and leaves one current version", func() {
		second := start()
		DeferCleanup(second.stop)
		token := tokenFor(server.url, clientName, clientSecret)
		const writers, each = 8, 5
		var mu sync.Mutex
		written := map[string]string{} // id → value
		var wg sync.WaitGroup
		for w := range writers {
			base := server.url
			if w%2 == 1 {
				base = second.url
			}
			wg.Go(func() {
				defer GinkgoRecover()
				for i := range each {
					v := fmt.Sprintf("w%d-%d", w, i)
					a := call(base, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/race/x", "type": "value", "value": v})
					Expect(a.status).To(Equal(http.StatusOK), a.body)
					mu.Lock()
					written[a.json()["id"].(string)] = v
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		Expect(written).To(HaveLen(writers * each))

		all := call(second.url, http.MethodGet, "/api/v1/data?name=/race/x", token, nil).json()["data"].([]any)
		Expect(all).To(HaveLen(writers * each))
		got := map[string]string{}
		for _, v := range all {
			m := v.(map[string]any)
			got[m["id"].(string)] = m["value"].(string)
		}
		Expect(got).To(Equal(written))
		current := call(server.url, http.MethodGet, "/api/v1/data?name=/race/x&current=true", token, nil).json()["data"].([]any)
		Expect(current).To(HaveLen(1))
		Expect(current[0]).To(Equal(all[0]))
		// The versions are numbered 1…n without a gap or a twin.
		var secrets corev1.SecretList
		Expect(cp.Client.List(ctx, &secrets, client.InNamespace(namespace), client.MatchingLabels{store.LabelCredential: store.Hash("/race/x")})).To(Succeed())
		var numbers []string
		for _, s := range secrets.Items {
			numbers = append(numbers, s.Annotations["config-server.bosh-injector.io/version"])
		}
		var want []string
		for n := 1; n <= writers*each; n++ {
			want = append(want, fmt.Sprint(n))
		}
		Expect(numbers).To(ConsistOf(want))
	})

	It("generates one value when two servers generate one name with no-overwrite at once", func() {
		second := start()
		DeferCleanup(second.stop)
		token := tokenFor(server.url, clientName, clientSecret)
		var mu sync.Mutex
		ids := map[string]bool{}
		var wg sync.WaitGroup
		for w := range 8 {
			base := server.url
			if w%2 == 1 {
				base = second.url
			}
			wg.Go(func() {
				defer GinkgoRecover()
				a := call(base, http.MethodPost, "/api/v1/data", token, map[string]any{"name": "/race/generated", "type": "rsa", "mode": "no-overwrite"})
				Expect(a.status).To(Equal(http.StatusOK), a.body)
				mu.Lock()
				ids[a.json()["id"].(string)] = true
				mu.Unlock()
			})
		}
		wg.Wait()
		Expect(ids).To(HaveLen(1))
		Expect(call(server.url, http.MethodGet, "/api/v1/data?name=/race/generated", token, nil).json()["data"]).To(HaveLen(1))
	})
})

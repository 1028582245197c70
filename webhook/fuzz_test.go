package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// FuzzHandle sends random pods, with random BPM info stored as the group's
// bpm Secret, through the admission handler: it must never panic, and an
// admitted pod's patch must apply to the request and give exactly the pod
// inject.Mutate makes of it, which is what diffing the whole pod gave;
// another pod of the instance, patched from the JSON the handler keeps,
// gets the same patch.
func FuzzHandle(f *testing.F) {
	cases, _ := filepath.Glob("../inject/testdata/*.yaml")
	for _, file := range cases {
		if strings.HasSuffix(file, ".golden.yaml") {
			continue
		}
		data, _ := os.ReadFile(file)
		var c struct {
			Info bpm.Info   `json:"info"`
			Pod  corev1.Pod `json:"pod"`
		}
		if yaml.Unmarshal(data, &c) != nil {
			continue
		}
		pod, _ := json.Marshal(c.Pod)
		info, _ := json.Marshal(c.Info)
		f.Add(pod, info, true)
	}
	f.Fuzz(func(t *testing.T, podJSON, infoJSON []byte, matchLabels bool) {
		var info bpm.Info
		if json.Unmarshal(infoJSON, &info) != nil {
			return
		}
		// The info names its resolved Secret, which is stored with it.
		info.ResolvedSecret = names.VersionedSecret(info.Deployment, names.KindResolved, info.InstanceGroup, 1)
		raw := podJSON
		var pod corev1.Pod
		if json.Unmarshal(podJSON, &pod) == nil && matchLabels {
			// Most random pods would be skipped or find no Secret; point
			// them at the stored group so injection itself is exercised.
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels[names.LabelDeployment] = info.Deployment
			pod.Labels[names.LabelInstanceGroup] = info.InstanceGroup
			raw, _ = json.Marshal(&pod)
		}
		// A handler and a store per input: its memos are keyed by Secret
		// UID, which the fake client leaves empty.
		c := fake.NewClientBuilder().Build()
		if err := fixtures.StoreInfo(context.Background(), c, operatorNamespace, "fuzz", info); err != nil {
			return
		}
		h := &webhook.Handler{Cache: c, Settings: inject.Settings{OperatorImage: "localhost/bosh-injector:dev"}, OperatorNamespace: operatorNamespace, Log: logr.Discard()}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Namespace: "fuzz", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		}}
		resp := h.Handle(context.Background(), req)
		if !resp.Allowed || len(resp.Patch) == 0 {
			return
		}
		// The second pod of the instance gets its patch from the JSON the
		// first one's encoded.
		if again := h.Handle(context.Background(), req); !bytes.Equal(again.Patch, resp.Patch) {
			t.Fatalf("the instance's second patch differs from its first:\n%s\n%s", again.Patch, resp.Patch)
		}
		if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
		}
		ops := resp.Patch
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatalf("patch does not decode: %v", err)
		}
		patched, err := patch.Apply(raw)
		if err != nil {
			t.Fatalf("patch does not apply to the request: %v", err)
		}
		var got corev1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(patched, &got); err != nil {
			t.Fatalf("patched request is no pod: %v", err)
		}
		var want corev1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &want); err != nil {
			t.Fatalf("admitted a request that is no pod: %v", err)
		}
		// The info as stored and read back.
		data, err := secretdata.Encode(info)
		if err != nil {
			t.Fatal(err)
		}
		var stored bpm.Info
		if err := secretdata.Decode(data, &stored); err != nil {
			t.Fatal(err)
		}
		rec, err := trust.Read(context.Background(), c, operatorNamespace, "fuzz", info.Deployment)
		if err != nil || rec == nil {
			t.Fatalf("admitted a pod without a record: %v", err)
		}
		digest := rec.Groups[names.LabelValue(info.InstanceGroup)].Latest().Resolved.SHA256
		inst, err := inject.InstanceOf(&want, &stored)
		// No deploy has started any instance: a StatefulSet's pod is held.
		_, _, held := inject.StatefulSetOrdinal(&want)
		if err == nil {
			err = inject.Mutate(&want, inject.Plan{Info: &stored, Instance: inst, Settings: h.Settings, ResolvedDigest: digest, Held: held})
		}
		if err != nil {
			t.Fatalf("admitted a pod inject refuses: %v", err)
		}
		gotJSON, _ := json.Marshal(&got)
		wantJSON, _ := json.Marshal(&want)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("patched request differs from the mutated pod:\n got %s\nwant %s\npatch %s", gotJSON, wantJSON, ops)
		}
	})
}

package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
)

// Check asks the webhook at url, trusting only ca, to admit a labelled pod
// of a deployment that cannot have been gathered, as the apiserver would,
// and succeeds when the answer is that pod's denial: the webhook is up,
// serves a certificate for its address and answers from its cache. It is
// what the chart's `helm test` runs.
func Check(ctx context.Context, url string, ca []byte) (string, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", fmt.Errorf("no PEM certificate in the CA bundle")
	}
	pod := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "check-0", Labels: map[string]string{
			names.LabelDeployment: "bosh-injector-check", names.LabelInstanceGroup: "check"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "check", Image: "none"}}},
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		return "", err
	}
	const uid = types.UID("bosh-injector-check")
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: uid, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "bosh-injector-check", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("calling the webhook: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the webhook answered %s: %s", resp.Status, data)
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &answer); err != nil {
		return "", fmt.Errorf("the webhook's answer is no AdmissionReview: %w", err)
	}
	r := answer.Response
	switch {
	case r == nil || r.UID != uid:
		return "", fmt.Errorf("the webhook's answer is not for the request sent: %s", data)
	case r.Allowed || r.Result == nil || !strings.Contains(r.Result.Message, string(inject.ReasonNotGathered)):
		return "", fmt.Errorf("the webhook should deny a pod of an ungathered deployment (%s), it answered: %s", inject.ReasonNotGathered, data)
	}
	return r.Result.Message, nil
}

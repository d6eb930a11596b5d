package applier_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// seedEnvelope is seed 003's envelope ConfigMap: a ResourceQuota for
// namespace %[2]s and a MutatingWebhookConfiguration (named %[3]s here so
// tests do not share it), wrapped in ConfigMap %[1]s of namespace %[4]s.
const seedEnvelope = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s
  namespace: %[4]s
  annotations:
    kubernetes-fleet.io/envelope-configmap: "true"
data:
  resourceQuota.yaml: |
    apiVersion: v1
    kind: ResourceQuota
    metadata:
      name: mem-cpu-demo
      namespace: %[2]s
    spec:
      hard:
        requests.cpu: "1"
        requests.memory: 1Gi
        limits.cpu: "2"
        limits.memory: 2Gi
  webhook.yaml: |
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingWebhookConfiguration
    metadata:
      creationTimestamp: null
      labels:
        azure-workload-identity.io/system: "true"
      name: %[3]s
    webhooks:
    - admissionReviewVersions:
      - v1
      - v1beta1
      clientConfig:
        service:
          name: azure-wi-webhook-webhook-service
          namespace: %[2]s
          path: /mutate-v1-pod
      failurePolicy: Fail
      matchPolicy: Equivalent
      name: mutation.azure-workload-identity.io
      objectSelector:
        matchLabels:
          flotilla-test: never-matches
      rules:
      - apiGroups:
        - ""
        apiVersions:
        - v1
        operations:
        - CREATE
        - UPDATE
        resources:
        - pods
      sideEffects: None
`

// TestEnvelopeConfigMap places seed 003's namespace and envelope: the
// ResourceQuota and the webhook are applied, the envelope itself is not, and
// results name the envelope.
func TestEnvelopeConfigMap(t *testing.T) {
	a := newApplier(t)
	ns := name(t, "app")
	webhook := name(t, "wh")
	t.Cleanup(func() { _ = client(t).Resource(webhooks).Delete(t.Context(), webhook, deleteNow) })

	report, err := a.Apply(t.Context(), work(t, name(t, "crp"), api.ApplyStrategy{},
		fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns),
		fmt.Sprintf(seedEnvelope, "envelope-configmap", ns, webhook, ns)))
	if err != nil {
		t.Fatal(err)
	}
	if report.Applied.Status != "True" {
		t.Fatalf("not applied: %s", dump(report))
	}
	wantEnv := api.EnvelopeIdentifier{Name: "envelope-configmap", Namespace: ns, Type: api.ConfigMapEnvelopeType}
	for kind, n := range map[string]string{"ResourceQuota": "mem-cpu-demo", "MutatingWebhookConfiguration": webhook} {
		res := result(t, report, kind, n)
		if res.Resource.Envelope == nil || *res.Resource.Envelope != wantEnv {
			t.Errorf("%s result carries envelope %+v, want %+v", kind, res.Resource.Envelope, wantEnv)
		}
		if res.Applied.Status != "True" || res.Available.Status != "True" && kind == "ResourceQuota" {
			t.Errorf("%s: %s", kind, dump(res))
		}
	}
	if len(report.Manifests) != 3 {
		t.Errorf("want results for the namespace and the two wrapped objects, got %s", dump(report.Manifests))
	}

	quota := get(t, quotas, ns, "mem-cpu-demo")
	if quota == nil || nested(t, quota, "spec", "hard", "limits.memory") != "2Gi" {
		t.Fatalf("ResourceQuota not applied as wrapped: %v", quota)
	}
	hook := get(t, webhooks, "", webhook)
	if hook == nil || hook.GetLabels()["azure-workload-identity.io/system"] != "true" || !manifest.Owned(hook.GetLabels()) {
		t.Fatalf("webhook not applied as wrapped: %v", hook)
	}
	if get(t, configMaps, ns, "envelope-configmap") != nil {
		t.Error("the envelope ConfigMap itself was placed on the member")
	}
}

// TestEnvelopeFailsAlone is seed 003's failure: the envelope in namespace
// test-ns wraps a ResourceQuota for namespace app, which does not exist on
// the member. That object fails with the server's reason and the envelope's
// identity; its sibling and the rest of the placement apply.
func TestEnvelopeFailsAlone(t *testing.T) {
	a := newApplier(t)
	testNS := name(t, "test-ns")
	missingNS := name(t, "app")
	webhook := name(t, "wh")
	t.Cleanup(func() { _ = client(t).Resource(webhooks).Delete(t.Context(), webhook, deleteNow) })

	report, err := a.Apply(t.Context(), work(t, name(t, "crp"), api.ApplyStrategy{},
		fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", testNS),
		fmt.Sprintf(seedEnvelope, "envelop-configmap", missingNS, webhook, testNS)))
	if err != nil {
		t.Fatal(err)
	}
	res := result(t, report, "ResourceQuota", "mem-cpu-demo")
	wantEnv := api.EnvelopeIdentifier{Name: "envelop-configmap", Namespace: testNS, Type: api.ConfigMapEnvelopeType}
	if res.Resource.Envelope == nil || *res.Resource.Envelope != wantEnv || res.Resource.Namespace != missingNS {
		t.Errorf("failed object identified as %+v (envelope %+v)", res.Resource, res.Resource.Envelope)
	}
	wantMsg := api.ManifestApplyFailedMessage(fmt.Sprintf(`namespaces "%s" not found`, missingNS))
	if res.Applied.Status != "False" || res.Applied.Reason != api.ManifestApplyFailedReason || res.Applied.Message != wantMsg {
		t.Errorf("applied = %+v, want False/%s/%q", res.Applied, api.ManifestApplyFailedReason, wantMsg)
	}
	if hook := result(t, report, "MutatingWebhookConfiguration", webhook); hook.Applied.Status != "True" {
		t.Errorf("the sibling in the envelope did not apply: %s", dump(hook))
	}
	if nsRes := result(t, report, "Namespace", testNS); nsRes.Applied.Status != "True" {
		t.Errorf("the namespace did not apply: %s", dump(nsRes))
	}
	if report.Applied.Status != "False" || report.Applied.Reason != api.ApplyFailedReason ||
		!strings.Contains(report.Applied.Message, "failedPlacements") {
		t.Errorf("cluster applied = %+v", report.Applied)
	}
}

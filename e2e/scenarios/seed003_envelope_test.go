package scenarios

import (
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

const webhookName = "azure-wi-webhook-mutating-webhook-configuration"

// TestSeed003EnvelopeIsUnwrappedOnTheMember: a ConfigMap envelope carries objects that must
// not take effect on the hub (a ResourceQuota, a MutatingWebhookConfiguration). On the
// member the objects it carries exist and the envelope itself does not; the status lists
// the envelope among the selected resources, not its contents, and reports no failure.
func TestSeed003EnvelopeIsUnwrappedOnTheMember(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-envelope")
	s.applyFile(t, "seed003-envelope.yaml")
	// Applied, as the seed's status shows. (Available follows unavailablePeriodSeconds, 60 by
	// default, after the apply: a webhook configuration's availability cannot be tracked.)
	crp := s.applyCondition(t, "crp-envelope", metav1.ConditionTrue)

	if got := scheduledClusters(crp); !reflect.DeepEqual(got, []string{"member-1"}) {
		t.Errorf("crp-envelope is placed on %v, want member-1", got)
	}
	want := []api.ResourceIdentifier{
		{Version: "v1", Kind: "Namespace", Name: "app"},
		{Version: "v1", Kind: "ConfigMap", Name: "envelope-configmap", Namespace: "app"},
	}
	if !sameResources(crp.Status.SelectedResources, want) {
		t.Errorf("selectedResources = %+v, want the namespace and the envelope only: %+v", crp.Status.SelectedResources, want)
	}
	if ps := clusterStatus(crp, "member-1"); ps == nil || len(ps.FailedPlacements) > 0 {
		t.Errorf("member-1's status: %+v, want no failedPlacements", ps)
	}

	m := s.member("member-1")
	quota, err := m.CoreV1().ResourceQuotas("app").Get(t.Context(), "mem-cpu-demo", metav1.GetOptions{})
	if err != nil {
		t.Errorf("the enveloped ResourceQuota is not on member-1: %v", err)
	} else if got := quota.Spec.Hard["requests.memory"]; got.String() != "1Gi" {
		t.Errorf("ResourceQuota app/mem-cpu-demo on member-1 has hard requests.memory %s, want 1Gi", got.String())
	}
	hook, err := m.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), webhookName, metav1.GetOptions{})
	if err != nil {
		t.Errorf("the enveloped MutatingWebhookConfiguration is not on member-1: %v", err)
	} else if hook.Labels["azure-workload-identity.io/system"] != "true" || len(hook.Webhooks) != 1 || hook.Webhooks[0].Name != "mutation.azure-workload-identity.io" {
		t.Errorf("MutatingWebhookConfiguration on member-1 is not the enveloped one: labels %v, webhooks %+v", hook.Labels, hook.Webhooks)
	}
	if _, err := m.CoreV1().ConfigMaps("app").Get(t.Context(), "envelope-configmap", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the envelope ConfigMap itself on member-1: %v, want it not placed", err)
	}
	// Only the chosen member gets them.
	if _, err := s.member("member-2").AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), webhookName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook on member-2: %v, want none", err)
	}
}

// TestSeed003EnvelopeFailureNamesTheEnvelope: an object in an envelope that cannot be applied
// (its namespace does not exist on the member) is reported in failedPlacements with the
// envelope that carried it.
func TestSeed003EnvelopeFailureNamesTheEnvelope(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-envelope-failure")
	s.applyFile(t, "seed003-envelope-failure.yaml")

	var failures []clusterFailures
	poll.Every(t, step, patience, "the enveloped ResourceQuota to be reported failed", func() (err error) {
		if failures, err = s.failedPlacements(t, "crp-envelope-failure"); err != nil {
			return err
		}
		if len(failures) == 0 {
			return errNoFailures
		}
		return nil
	})
	if len(failures) != 1 || failures[0].ClusterName != "member-2" || len(failures[0].FailedPlacements) != 1 {
		t.Fatalf("failedPlacements %+v, want one object on member-2", failures)
	}
	got := failures[0].FailedPlacements[0]
	wantID := api.ResourceIdentifier{Version: "v1", Kind: "ResourceQuota", Name: "mem-cpu-demo", Namespace: "app",
		Envelope: &api.EnvelopeIdentifier{Name: "envelop-configmap", Namespace: "test-ns", Type: api.ConfigMapEnvelopeType}}
	if !reflect.DeepEqual(got.ResourceIdentifier, wantID) {
		t.Errorf("failed object %+v (envelope %+v), want %+v (envelope %+v)", got.ResourceIdentifier, got.Envelope, wantID, wantID.Envelope)
	}
	c := got.Condition
	if c.Type != "Applied" || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `namespaces "app" not found`) {
		t.Errorf("failed condition %+v, want Applied False saying namespaces \"app\" not found", c)
	}
	t.Logf("member-2: %s: %s", c.Reason, c.Message)

	crp := s.applyCondition(t, "crp-envelope-failure", metav1.ConditionFalse)
	if c := meta.FindStatusCondition(crp.Status.Conditions, string(api.ClusterResourcePlacementAppliedConditionType)); c.Reason != api.ApplyFailedReason ||
		c.Message != "Failed to apply resources to 1 cluster(s), please check the `failedPlacements` status" {
		t.Errorf("ClusterResourcePlacementApplied = %s: %s", c.Reason, c.Message)
	}
	wantSelected := []api.ResourceIdentifier{
		{Version: "v1", Kind: "Namespace", Name: "test-ns"},
		{Version: "v1", Kind: "ConfigMap", Name: "envelop-configmap", Namespace: "test-ns"},
	}
	if !sameResources(crp.Status.SelectedResources, wantSelected) {
		t.Errorf("selectedResources = %+v, want %+v", crp.Status.SelectedResources, wantSelected)
	}
	if _, err := s.member("member-2").CoreV1().ResourceQuotas("app").Get(t.Context(), "mem-cpu-demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ResourceQuota app/mem-cpu-demo on member-2: %v, want none", err)
	}
}

package scenarios

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/harness/poll"
)

// TestEnvelopesAreAppliedOnTheMember: upstream's ClusterResourceEnvelope (cluster-scoped
// contents) and ResourceEnvelope (namespaced contents, its own namespace), selected by a
// placement, are unwrapped and their contents applied on the member; the envelopes themselves
// never reach it.
func TestEnvelopesAreAppliedOnTheMember(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-envelopes")
	s.apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: envelope-demo}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceEnvelope
metadata: {name: app-config, namespace: envelope-demo}
data:
  "cm.yaml":
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: wrapped-config, namespace: envelope-demo}
    data: {mode: enveloped}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourceEnvelope
metadata: {name: cluster-rbac}
data:
  "clusterrole.yaml":
    apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata: {name: envelope-demo-reader}
    rules:
    - {apiGroups: [""], resources: [configmaps], verbs: [get, list]}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: crp-envelopes}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: envelope-demo}
  - {group: placement.kubernetes-fleet.io, version: v1beta1, kind: ClusterResourceEnvelope, name: cluster-rbac}
  policy:
    placementType: PickFixed
    clusterNames: [member-1]
`)
	s.converged(t, "crp-envelopes", 1)
	m := s.member("member-1")
	poll.Every(t, step, patience, "the enveloped objects on member-1", func() error {
		cm, err := m.CoreV1().ConfigMaps("envelope-demo").Get(t.Context(), "wrapped-config", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["mode"] != "enveloped" {
			return fmt.Errorf("wrapped-config data %v", cm.Data)
		}
		role, err := m.RbacV1().ClusterRoles().Get(t.Context(), "envelope-demo-reader", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(role.Rules) != 1 || role.Rules[0].Resources[0] != "configmaps" {
			return fmt.Errorf("envelope-demo-reader rules %+v", role.Rules)
		}
		return nil
	})
	// The envelopes stay on the hub: their kinds do not even exist on the member.
	if _, err := m.Discovery().ServerResourcesForGroupVersion("placement.kubernetes-fleet.io/v1beta1"); err == nil {
		t.Error("member-1 serves placement.kubernetes-fleet.io/v1beta1: an envelope kind reached it")
	}
}

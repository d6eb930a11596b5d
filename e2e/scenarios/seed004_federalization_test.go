package scenarios

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// The placements fleetctl makes of the seed's PropagationPolicy default/nginx-pp.
const (
	keepPlacement  = "pp.default.nginx-pp"
	adoptPlacement = "pp-adopt.default.nginx-pp"
)

// TestSeed004FederalizationAdoptsWithoutRestart plays KubeAdmiral's resource federalization:
// a Deployment and a Service run on member-1 unmanaged; the user applies the seed's
// PropagationPolicy and the hub copies labelled for it and annotated
// kubeadmiral.io/conflict-resolution: adopt. Flotilla maps the policy to placements, adopts
// both objects on member-1, and the Deployment is not changed: its generation, ReplicaSet
// and pods stay the same.
func TestSeed004FederalizationAdoptsWithoutRestart(t *testing.T) {
	s := fleetFor(t)
	m := s.member("member-1")
	deployment, service := memberObjects(t)
	if _, err := m.AppsV1().Deployments("default").Create(t.Context(), deployment, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Deployment my-nginx on member-1: %v", err)
	}
	if _, err := m.CoreV1().Services("default").Create(t.Context(), service, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service my-nginx on member-1: %v", err)
	}
	t.Cleanup(func() {
		// fleetctl delete -f of the same file deletes the policy's placements (their
		// deleteStrategy removes the adopted objects) and the hub copies.
		ctx := context.Background() // the test's context ends before its cleanup
		if out, errOut, err := s.fleetctl(ctx, "", "delete", "-f", "testdata/seed004-hub.yaml"); err != nil {
			t.Errorf("fleetctl delete -f testdata/seed004-hub.yaml: %v\n%s%s", err, out, errOut)
			return
		}
		if out, errOut, err := s.fleetctl(ctx, "", "wait", "crp", keepPlacement, adoptPlacement, "--for=delete", "--timeout="+patience.String()); err != nil {
			t.Errorf("fleetctl wait --for=delete: %v\n%s%s", err, out, errOut)
		}
	})
	var before *workload
	poll.Every(t, step, patience, "Deployment my-nginx to be available on member-1", func() (err error) {
		if before, err = s.observe(t, "member-1"); err != nil {
			return err
		}
		if d := before.deployment; d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas != 2 || len(before.pods) != 2 {
			return fmt.Errorf("observed generation %d of %d, %d available replicas, %d pods",
				d.Status.ObservedGeneration, d.Generation, d.Status.AvailableReplicas, len(before.pods))
		}
		return nil
	})

	out := s.applyFile(t, "seed004-hub.yaml")
	for _, line := range []string{
		"propagationpolicy.core.kubeadmiral.io/nginx-pp configured (as clusterresourceplacements " + keepPlacement + " and " + adoptPlacement + ")",
		"deployment.apps/my-nginx configured (adoptable: labelled flotilla.dev/conflict-resolution=adopt)",
		"service/my-nginx configured (adoptable: labelled flotilla.dev/conflict-resolution=adopt)",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("fleetctl apply did not print %q", line)
		}
	}

	crp := s.converged(t, adoptPlacement, 1)
	if got := scheduledClusters(crp); !slices.Equal(got, []string{"member-1"}) {
		t.Errorf("%s is placed on %v, want member-1, the policy's cluster", adoptPlacement, got)
	}
	wantSelected := []api.ResourceIdentifier{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "default", Name: "my-nginx"},
		{Version: "v1", Kind: "Service", Namespace: "default", Name: "my-nginx"},
	}
	if !sameResources(crp.Status.SelectedResources, wantSelected) {
		t.Errorf("%s selected %+v, want %+v", adoptPlacement, crp.Status.SelectedResources, wantSelected)
	}
	// The other placement takes what is labelled for the policy but not adoptable: nothing
	// here. It is valid and selects nothing.
	keep := s.placementWhen(t, keepPlacement, keepPlacement+" to be scheduled", func(crp *api.ClusterResourcePlacement) error {
		return conditionTrue(crp.Status.Conditions, string(api.ClusterResourcePlacementScheduledConditionType), crp.Generation)
	})
	if len(keep.Status.SelectedResources) != 0 {
		t.Errorf("%s selected %+v, want nothing: the objects are to be adopted", keepPlacement, keep.Status.SelectedResources)
	}
	if table := s.run(t, "get", "crp"); !strings.Contains(table, keepPlacement) || !strings.Contains(table, adoptPlacement) {
		t.Errorf("fleetctl get crp does not list the policy's placements:\n%s", table)
	}

	records := s.takeovers(t, adoptPlacement)
	for _, kind := range []string{"Deployment", "Service"} {
		if r := latestTakeover(records, "member-1", kind, "my-nginx"); r == nil || r.Outcome != "TakenOver" || r.Mode != api.WhenToTakeOverTypeAlways {
			t.Errorf("takeover of %s my-nginx on member-1 = %+v, want TakenOver with Always", kind, r)
		}
	}

	after, err := s.observe(t, "member-1")
	if err != nil {
		t.Fatal(err)
	}
	d := after.deployment
	if d.UID != before.deployment.UID || d.Generation != before.deployment.Generation {
		t.Errorf("Deployment my-nginx on member-1 is uid %s generation %d after federalization, was uid %s generation %d: it was changed",
			d.UID, d.Generation, before.deployment.UID, before.deployment.Generation)
	}
	// Adopted: the placement owns it now (the member-side marks of services/apply). The
	// policy label is a hub-side control and, as KubeAdmiral's own template does, is not
	// carried to the member.
	for _, obj := range []metav1.Object{d, after.service} {
		labels := obj.GetLabels()
		if labels["placement.flotilla.dev/"+adoptPlacement] != "owner" || labels["flotilla.dev/managed-by"] != "flotilla" {
			t.Errorf("%s my-nginx on member-1 has labels %v: not owned by %s", kindOf(obj), labels, adoptPlacement)
		}
		if _, ok := labels[api.PropagationPolicyNameLabel]; ok {
			t.Errorf("%s my-nginx on member-1 carries the hub-side label %s", kindOf(obj), api.PropagationPolicyNameLabel)
		}
	}
	if !maps.Equal(after.replicaSets, before.replicaSets) {
		t.Errorf("ReplicaSets of my-nginx on member-1 are %v, were %v: the pods were rolled", after.replicaSets, before.replicaSets)
	}
	if !maps.Equal(after.pods, before.pods) {
		t.Errorf("pods of my-nginx on member-1 are %v, were %v: they were restarted", after.pods, before.pods)
	}
	if after.service.UID != before.service.UID || after.service.Spec.ClusterIP != before.service.Spec.ClusterIP {
		t.Errorf("Service my-nginx on member-1 is uid %s clusterIP %s, was uid %s clusterIP %s",
			after.service.UID, after.service.Spec.ClusterIP, before.service.UID, before.service.Spec.ClusterIP)
	}
}

func kindOf(obj metav1.Object) string {
	if _, ok := obj.(*appsv1.Deployment); ok {
		return "Deployment"
	}
	return "Service"
}

// memberObjects are the seed's my-nginx Deployment and Service, for namespace default.
func memberObjects(t *testing.T) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	docs := strings.Split(readTestdata(t, "seed004-member-1.yaml"), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("testdata/seed004-member-1.yaml holds %d documents, want 2", len(docs))
	}
	var d appsv1.Deployment
	var svc corev1.Service
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &d); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &svc); err != nil {
		t.Fatal(err)
	}
	d.Namespace, svc.Namespace = "default", "default"
	return &d, &svc
}

// workload is the seed's workload on a member as kubectl shows it.
type workload struct {
	deployment  *appsv1.Deployment
	service     *corev1.Service
	replicaSets map[string]types.UID // name -> uid
	pods        map[string]types.UID
}

func (s *stack) observe(t *testing.T, member string) (*workload, error) {
	m := s.member(member)
	d, err := m.AppsV1().Deployments("default").Get(t.Context(), "my-nginx", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	svc, err := m.CoreV1().Services("default").Get(t.Context(), "my-nginx", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	w := &workload{deployment: d, service: svc, replicaSets: map[string]types.UID{}, pods: map[string]types.UID{}}
	rss, err := m.AppsV1().ReplicaSets("default").List(t.Context(), metav1.ListOptions{LabelSelector: "run=my-nginx"})
	if err != nil {
		return nil, err
	}
	for _, rs := range rss.Items {
		w.replicaSets[rs.Name] = rs.UID
	}
	pods, err := m.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "run=my-nginx"})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			w.pods[p.Name] = p.UID
		}
	}
	return w, nil
}

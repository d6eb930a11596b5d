package applier_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// edit changes a member object as `kubectl edit` would.
func edit(t *testing.T, gvr schema.GroupVersionResource, ns, n string, change func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	u := get(t, gvr, ns, n)
	change(u)
	out, err := client(t).Resource(gvr).Namespace(ns).Update(t.Context(), u, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cmKey(ns, n string) manifest.Key {
	return manifest.Key{Kind: "ConfigMap", Namespace: ns, Name: n}
}

// TestDriftIfNotDrifted: a member-side edit of a field the hub sets is
// reported as a drift and left alone, also when the same desired state is
// applied again; a new hub version is applied.
func TestDriftIfNotDrifted(t *testing.T) {
	a := newApplier(t)
	placement := name(t, "crp")
	ns := name(t, "")
	strategy := api.ApplyStrategy{WhenToApply: api.WhenToApplyTypeIfNotDrifted}
	desired := work(t, placement, strategy, nsYAML(ns), configMapYAML(ns, "app-config", "1"))
	if _, err := a.Apply(t.Context(), desired); err != nil {
		t.Fatal(err)
	}

	live := edit(t, configMaps, ns, "app-config", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "edited", "data", "key")
	})
	reports, err := a.Recheck(t.Context(), placement, cmKey(ns, "app-config"), live)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 {
		t.Fatalf("want one report, got %s", dump(reports))
	}
	res := result(t, reports[0], "ConfigMap", "app-config")
	wantFailure(t, res, api.ManifestFoundDriftsReason, api.FoundDriftsError)
	wantDrift := api.PatchDetail{Path: "/data/key", ValueInHub: "1", ValueInMember: "edited"}
	if !slices.Equal(res.Drifts, []api.PatchDetail{wantDrift}) || res.FirstDriftedAt == nil {
		t.Errorf("drifts = %s", dump(res))
	}
	firstDrifted := *res.FirstDriftedAt

	// The same desired state again (a resync, a redelivery) does not overwrite.
	report, err := a.Apply(t.Context(), desired)
	if err != nil {
		t.Fatal(err)
	}
	res = result(t, report, "ConfigMap", "app-config")
	if res.Applied.Reason != api.ManifestFoundDriftsReason || !res.FirstDriftedAt.Equal(firstDrifted) {
		t.Errorf("after re-apply: %s (first drifted %s)", dump(res), firstDrifted)
	}
	if v := nested(t, get(t, configMaps, ns, "app-config"), "data", "key"); v != "edited" {
		t.Errorf("IfNotDrifted overwrote the member's edit: %v", v)
	}

	// A new hub version is applied.
	if _, err := a.Apply(t.Context(), work(t, placement, strategy, nsYAML(ns), configMapYAML(ns, "app-config", "2"))); err != nil {
		t.Fatal(err)
	}
	if v := nested(t, get(t, configMaps, ns, "app-config"), "data", "key"); v != "2" {
		t.Errorf("new hub version not applied: %v", v)
	}
}

// TestDriftAlways: a member-side edit is reported, then the hub's values are
// put back and the clean state is reported; a deleted object is re-created.
func TestDriftAlways(t *testing.T) {
	a := newApplier(t)
	placement := name(t, "crp")
	ns := name(t, "")
	mustApply(t, a, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "app-config", "1"))

	live := edit(t, configMaps, ns, "app-config", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "edited", "data", "key")
	})
	reports, err := a.Recheck(t.Context(), placement, cmKey(ns, "app-config"), live)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 {
		t.Fatalf("want a drift report and a corrected report, got %s", dump(reports))
	}
	drifted := result(t, reports[0], "ConfigMap", "app-config")
	if !slices.Equal(drifted.Drifts, []api.PatchDetail{{Path: "/data/key", ValueInHub: "1", ValueInMember: "edited"}}) {
		t.Errorf("drift report = %s", dump(drifted))
	}
	fixed := result(t, reports[1], "ConfigMap", "app-config")
	if fixed.Applied.Status != "True" || len(fixed.Drifts) != 0 {
		t.Errorf("corrected report = %s", dump(fixed))
	}
	if v := nested(t, get(t, configMaps, ns, "app-config"), "data", "key"); v != "1" {
		t.Errorf("hub value not re-applied: %v", v)
	}

	if err := client(t).Resource(configMaps).Namespace(ns).Delete(t.Context(), "app-config", deleteNow); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Recheck(t.Context(), placement, cmKey(ns, "app-config"), nil); err != nil {
		t.Fatal(err)
	}
	if u := get(t, configMaps, ns, "app-config"); u == nil || !manifest.OwnedBy(u.GetLabels(), placement) {
		t.Error("an object deleted on the member was not re-created")
	}

	// A change to a field the hub does not set is not drift (partial comparison).
	live = edit(t, configMaps, ns, "app-config", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "theirs", "data", "other")
	})
	if reports, err := a.Recheck(t.Context(), placement, cmKey(ns, "app-config"), live); err != nil || len(reports) != 0 {
		t.Errorf("an unmanaged field counted as drift: %s %v", dump(reports), err)
	}
}

// TestAvailability follows a Deployment to available as its controller
// reports status, and a not-trackable kind to available after the
// placement's unavailable period.
func TestAvailability(t *testing.T) {
	a := newApplier(t)
	placement := name(t, "crp")
	ns := name(t, "")
	report, err := a.Apply(t.Context(), work(t, placement, api.ApplyStrategy{}, nsYAML(ns),
		deploymentYAML("nginx:1.27", "")(ns, "web"),
		fmt.Sprintf("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: %s}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {app: web}}\n", ns)))
	if err != nil {
		t.Fatal(err)
	}
	if report.Available.Status == "True" {
		t.Fatalf("available before any controller ran: %s", dump(report))
	}
	pdb := result(t, report, "PodDisruptionBudget", "web")
	if pdb.Available.Reason != api.ManifestNotTrackableReason || pdb.Available.Status != "Unknown" {
		t.Errorf("not-trackable object = %s", dump(pdb.Available))
	}
	if a.NextRecheck(placement).IsZero() {
		t.Error("no recheck scheduled for the not-trackable object")
	}

	// The deployment controller reports status; the watch would call Recheck.
	var last []*events.WorkReported
	poll.Every(t, step, timeout, "the Deployment to become available", func() error {
		reports, err := a.Recheck(t.Context(), placement, manifest.Key{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "web"},
			get(t, deployments, ns, "web"))
		if err != nil {
			t.Fatal(err)
		}
		if len(reports) > 0 {
			last = reports
		}
		if av := result(t, a.Report(placement), "Deployment", "web").Available; av.Status != "True" {
			return fmt.Errorf("Available is %s", dump(av))
		}
		return nil
	})
	if len(last) == 0 {
		t.Error("the change of availability produced no report")
	}

	time.Sleep(time.Until(a.NextRecheck(placement)))
	r := a.Refresh(placement)
	if r == nil {
		t.Fatal("no new report after the unavailable period")
	}
	if got := result(t, r, "PodDisruptionBudget", "web").Available; got.Status != "True" || got.Reason != api.ManifestNotTrackableReason {
		t.Errorf("not-trackable object after its period = %+v", got)
	}
	if r.Available.Status != "True" {
		t.Errorf("placement availability = %+v", r.Available)
	}
}

// TestCRDThenCustomResource applies a CRD and a resource of it in one
// placement: the CRD goes first and the resource waits until it is served.
func TestCRDThenCustomResource(t *testing.T) {
	a := newApplier(t)
	ns := name(t, "")
	group := strings.ReplaceAll(name(t, ""), "-", "") + ".example.com"
	crd := fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group)
	cr := fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: gear, namespace: %s}\nspec: {size: 3}\n", group, ns)
	// The custom resource comes first in the manifests; waves put it last.
	report, err := a.Apply(t.Context(), work(t, name(t, "crp"), api.ApplyStrategy{}, cr, crd, nsYAML(ns)))
	if err != nil {
		t.Fatal(err)
	}
	if report.Applied.Status != "True" {
		t.Fatalf("report = %s", dump(report))
	}
	if r := result(t, report, "CustomResourceDefinition", "widgets."+group); r.Available.Status != "True" {
		t.Errorf("CRD availability = %+v", r.Available)
	}
	if r := result(t, report, "Widget", "gear"); r.Available.Reason != api.ManifestNotTrackableReason {
		t.Errorf("custom resource availability = %+v", r.Available)
	}
}

// TestUnreachable: a member that cannot be reached fails every manifest of
// the placement with a message that says so.
func TestUnreachable(t *testing.T) {
	a, err := applier.New(&rest.Config{Host: "https://127.0.0.1:1", Timeout: 2 * time.Second}, applier.Options{Cluster: member})
	if err != nil {
		t.Fatal(err)
	}
	report, err := a.Apply(t.Context(), work(t, "crp", api.ApplyStrategy{}, nsYAML("x"), configMapYAML("x", "y", "1")))
	if !errors.Is(err, applier.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	if report == nil || report.Applied.Status != "False" || len(report.Manifests) != 2 {
		t.Fatalf("report = %s", dump(report))
	}
	for _, m := range report.Manifests {
		if m.Applied.Reason != api.ManifestApplyFailedReason || !strings.Contains(m.Applied.Message, "unreachable") {
			t.Errorf("manifest result = %+v", m.Applied)
		}
	}
}

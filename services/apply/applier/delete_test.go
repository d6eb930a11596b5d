package applier_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

func nsYAML(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)
}

func configMapYAML(ns, n, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  key: %q\n", n, ns, value)
}

func mustApply(t *testing.T, a *applier.Applier, placement string, strategy api.ApplyStrategy, manifests ...string) {
	t.Helper()
	report, err := a.Apply(t.Context(), work(t, placement, strategy, manifests...))
	if err != nil {
		t.Fatal(err)
	}
	if report.Applied.Status != "True" {
		t.Fatalf("apply failed: %s", dump(report))
	}
}

// gone reports whether an object no longer exists or is being deleted.
func gone(t *testing.T, ns, n string) bool {
	u := get(t, configMaps, ns, n)
	return u == nil || u.GetDeletionTimestamp() != nil
}

// TestDeleteOwnedOnly deletes exactly what the placement owns: its objects go,
// a pre-existing object elsewhere stays, and a namespace holding an object the
// placement does not own is kept (unmarked) instead of taking it along.
func TestDeleteOwnedOnly(t *testing.T) {
	a := newApplier(t)
	placement := name(t, "crp")
	owned, shared, other := name(t, "owned"), name(t, "shared"), name(t, "other")
	create(t, nsYAML(other))
	preexisting := create(t, configMapYAML(other, "user-config", "mine"))

	mustApply(t, a, placement, api.ApplyStrategy{},
		nsYAML(owned), configMapYAML(owned, "app-config", "1"), deploymentYAML("nginx:1.27", "")(owned, "web"),
		nsYAML(shared), configMapYAML(shared, "app-config", "1"))
	// Someone adds their own object to one of the placement's namespaces.
	userObj := create(t, configMapYAML(shared, "user-config", "theirs"))

	report, err := a.Delete(t.Context(), placement, api.DeleteStrategy{})
	if err != nil {
		t.Fatal(err)
	}
	if !report.Deleted || report.Applied.Reason != applier.DeletedReason {
		t.Errorf("report = %s", dump(report))
	}

	poll.Every(t, step, timeout, "the placement's namespace to go", func() error {
		if u := get(t, namespaces, "", owned); u != nil && u.GetDeletionTimestamp() == nil {
			return errors.New("the namespace is there and not being deleted")
		}
		return nil
	})
	if d := get(t, deployments, owned, "web"); d != nil && d.GetDeletionTimestamp() == nil {
		t.Error("the placement's Deployment was not deleted")
	}
	if !gone(t, shared, "app-config") {
		t.Error("the placement's ConfigMap in the kept namespace was not deleted")
	}

	// Kept: the shared namespace, unmarked, with the user's object.
	sharedNS := get(t, namespaces, "", shared)
	if sharedNS == nil || sharedNS.GetDeletionTimestamp() != nil {
		t.Fatal("the namespace holding a user's object was deleted")
	}
	if manifest.Owned(sharedNS.GetLabels()) {
		t.Errorf("kept namespace still marked: %v", sharedNS.GetLabels())
	}
	kept := result(t, report, "Namespace", shared)
	if kept.Applied.Reason != applier.RetainedReason {
		t.Errorf("kept namespace result = %s", dump(kept))
	}
	if u := get(t, configMaps, shared, "user-config"); u == nil || u.GetUID() != userObj.GetUID() {
		t.Error("the user's object in the placement's namespace was deleted")
	}
	if u := get(t, configMaps, other, "user-config"); u == nil || u.GetUID() != preexisting.GetUID() {
		t.Error("a pre-existing object the placement does not own was deleted")
	} else {
		untouched(t, preexisting, u)
	}
}

// TestAbandon leaves the placement's objects running and takes only its marks
// off: a Deployment keeps its generation.
func TestAbandon(t *testing.T) {
	a := newApplier(t)
	placement := name(t, "crp")
	ns := name(t, "")
	mustApply(t, a, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "app-config", "1"), deploymentYAML("nginx:1.27", "")(ns, "web"))
	before := get(t, deployments, ns, "web")

	report, err := a.Delete(t.Context(), placement, api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyAbandon})
	if err != nil {
		t.Fatal(err)
	}
	if !report.Deleted || report.Applied.Reason != applier.AbandonedReason {
		t.Errorf("report = %s", dump(report))
	}
	for _, u := range []struct {
		what string
		obj  interface{ GetLabels() map[string]string }
	}{
		{"namespace", get(t, namespaces, "", ns)},
		{"configmap", get(t, configMaps, ns, "app-config")},
		{"deployment", get(t, deployments, ns, "web")},
	} {
		if u.obj == nil {
			t.Fatalf("%s was deleted", u.what)
		}
		for k := range u.obj.GetLabels() {
			if manifest.IsOwnMark(k) {
				t.Errorf("%s still carries mark %s", u.what, k)
			}
		}
	}
	if after := get(t, deployments, ns, "web"); after.GetGeneration() != before.GetGeneration() || after.GetDeletionTimestamp() != nil {
		t.Errorf("abandoned Deployment changed: generation %d -> %d", before.GetGeneration(), after.GetGeneration())
	}
	if v := nested(t, get(t, configMaps, ns, "app-config"), "data", "key"); v != "1" {
		t.Errorf("abandoned ConfigMap data = %v", v)
	}
}

// TestCoOwnership: allowCoOwnership is upstream's: a placement may share an
// object with owners that are not placements (ownerReferences), and keeps it
// for them when it goes; two placements never share one, allowed or not.
func TestCoOwnership(t *testing.T) {
	a := newApplier(t)
	first, second := name(t, "first"), name(t, "second")
	ns := name(t, "")
	mustApply(t, a, first, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "shared", "1"))

	for _, allow := range []bool{false, true} {
		report, err := a.Apply(t.Context(), work(t, second, api.ApplyStrategy{AllowCoOwnership: allow}, configMapYAML(ns, "shared", "1")))
		if err != nil {
			t.Fatal(err)
		}
		res := result(t, report, "ConfigMap", "shared")
		if res.Applied.Reason != api.ManifestFailedToTakeOverReason || res.Applied.Status != "False" {
			t.Errorf("a second placement with allowCoOwnership %v: %s", allow, dump(res))
		}
		if owners := manifest.OwnerTokens(get(t, configMaps, ns, "shared").GetLabels()); !slices.Equal(owners, []string{first}) {
			t.Errorf("owners = %v after a refused co-ownership (allowCoOwnership %v)", owners, allow)
		}
	}

	// An object another controller owns (an ownerReference).
	owner := get(t, configMaps, ns, "shared")
	create(t, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: owned
  namespace: %s
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: shared, uid: %s}
data: {v: "1"}
`, ns, owner.GetUID()))
	report, err := a.Apply(t.Context(), work(t, second, api.ApplyStrategy{}, configMapYAML(ns, "owned", "1")))
	if err != nil {
		t.Fatal(err)
	}
	if res := result(t, report, "ConfigMap", "owned"); res.Applied.Reason != api.ManifestFailedToTakeOverReason {
		t.Errorf("taking over an object with an ownerReference without allowCoOwnership: %s", dump(res))
	}
	mustApply(t, a, second, api.ApplyStrategy{AllowCoOwnership: true}, configMapYAML(ns, "owned", "1"))
	if owners := manifest.OwnerTokens(get(t, configMaps, ns, "owned").GetLabels()); !slices.Equal(owners, []string{second}) {
		t.Errorf("owners = %v, want [%s]", owners, second)
	}
	if _, err := a.Delete(t.Context(), second, api.DeleteStrategy{}); err != nil {
		t.Fatal(err)
	}
	cm := get(t, configMaps, ns, "owned")
	if cm == nil || cm.GetDeletionTimestamp() != nil {
		t.Fatal("an object co-owned with another controller was deleted with the placement")
	}
	if owners := manifest.OwnerTokens(cm.GetLabels()); len(owners) != 0 || len(cm.GetOwnerReferences()) != 1 {
		t.Errorf("after the placement left: owners %v, ownerReferences %v; want none and the controller's", owners, cm.GetOwnerReferences())
	}
}

// TestPruneDropped deletes an object the placement no longer lists, also
// after a restart (a fresh Applier finds it by its marks).
func TestPruneDropped(t *testing.T) {
	placement := name(t, "crp")
	ns := name(t, "")
	mustApply(t, newApplier(t), placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "keep", "1"), configMapYAML(ns, "drop", "1"), configMapYAML(ns, "drop-later", "1"))

	fresh := newApplier(t) // as after a restart
	mustApply(t, fresh, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "keep", "1"), configMapYAML(ns, "drop-later", "1"))
	if !gone(t, ns, "drop") {
		t.Error("a dropped object survived a fresh worker's apply")
	}
	mustApply(t, fresh, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "keep", "1"))
	if !gone(t, ns, "drop-later") {
		t.Error("a dropped object survived")
	}
	if gone(t, ns, "keep") {
		t.Error("a wanted object was deleted")
	}
}

// TestPruneDroppedDespiteAbandon: deleteStrategy Abandon is for the placement's
// deletion only (upstream), so an object the placement no longer selects is
// still deleted.
func TestPruneDroppedDespiteAbandon(t *testing.T) {
	placement := name(t, "crp")
	ns := name(t, "")
	a := newApplier(t)
	abandon := func(manifests ...string) {
		t.Helper()
		w := work(t, placement, api.ApplyStrategy{}, manifests...)
		w.DeleteStrategy = api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyAbandon}
		report, err := a.Apply(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		if report.Applied.Status != "True" {
			t.Fatalf("apply failed: %s", dump(report))
		}
	}
	abandon(nsYAML(ns), configMapYAML(ns, "keep", "1"), configMapYAML(ns, "drop", "1"))
	abandon(nsYAML(ns), configMapYAML(ns, "keep", "1"))
	if !gone(t, ns, "drop") {
		t.Error("an object no longer selected survived because of deleteStrategy Abandon")
	}
	if gone(t, ns, "keep") {
		t.Error("a wanted object was deleted")
	}
}

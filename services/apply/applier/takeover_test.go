package applier_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// takeoverCase is a pre-existing member object and the hub's manifest for it.
type takeoverCase struct {
	kind string
	gvr  schema.GroupVersionResource
	// hub and member render the manifests for a namespace and object name.
	hub    func(ns, name string) string
	member map[string]func(ns, name string) string // by member state
	// diffPath is where the "differing" member state differs, with values.
	diffPath, hubValue, memberValue string
	// extraPath is the extra field of the "extra" member state.
	extraPath, extraValue string
}

func namespaceYAML(labels string) func(ns, name string) string {
	return func(_, name string) string {
		return fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    app: web-2
%s`, name, labels)
	}
}

func deploymentYAML(image, extra string) func(ns, name string) string {
	return func(ns, name string) string {
		return fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  namespace: %s
  labels:
    app: web
spec:
  replicas: 0
%s
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: %s
        ports:
        - containerPort: 80
`, name, ns, extra, image)
	}
}

var takeoverCases = []takeoverCase{
	{
		kind: "Namespace", gvr: namespaces,
		hub: namespaceYAML("    team: green\n"),
		member: map[string]func(ns, name string) string{
			"same":      namespaceYAML("    team: green\n"),
			"differing": namespaceYAML("    team: blue\n"),
			"extra":     namespaceYAML("    team: green\n    owner: someone\n"),
		},
		diffPath: "/metadata/labels/team", hubValue: "green", memberValue: "blue",
		extraPath: "/metadata/labels/owner", extraValue: "someone",
	},
	{
		kind: "Deployment", gvr: deployments,
		hub: deploymentYAML("nginx:1.27", ""),
		member: map[string]func(ns, name string) string{
			"same":      deploymentYAML("nginx:1.27", ""),
			"differing": deploymentYAML("nginx:1.25", ""),
			"extra":     deploymentYAML("nginx:1.27", "  minReadySeconds: 5"),
		},
		diffPath: "/spec/template/spec/containers/0/image", hubValue: "nginx:1.27", memberValue: "nginx:1.25",
		extraPath: "/spec/minReadySeconds", extraValue: "5",
	},
}

// TestTakeover covers each whenToTakeOver mode with each comparison option on
// a pre-existing Namespace and Deployment that matches the hub, differs in a
// field the hub sets, or has an extra field the hub does not set.
func TestTakeover(t *testing.T) {
	a := newApplier(t)
	modes := []api.WhenToTakeOverType{api.WhenToTakeOverTypeAlways, api.WhenToTakeOverTypeIfNoDiff, api.WhenToTakeOverTypeNever}
	comparisons := []api.ComparisonOptionType{api.ComparisonOptionTypePartialComparison, api.ComparisonOptionTypeFullComparison}
	for _, c := range takeoverCases {
		for _, mode := range modes {
			for _, cmp := range comparisons {
				for _, state := range []string{"same", "differing", "extra"} {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", c.kind, mode, cmp, state), func(t *testing.T) {
						testTakeover(t, a, c, mode, cmp, state)
					})
				}
			}
		}
	}
}

func testTakeover(t *testing.T, a *applier.Applier, c takeoverCase, mode api.WhenToTakeOverType, cmp api.ComparisonOptionType, state string) {
	ns := name(t, "ns")
	objName := ns
	var manifests []string
	if c.kind != "Namespace" {
		create(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns))
		objName = "web"
	}
	before := create(t, c.member[state](ns, objName))
	manifests = append(manifests, c.hub(ns, objName))

	placement := name(t, "crp")
	report, err := a.Apply(t.Context(), work(t, placement, api.ApplyStrategy{WhenToTakeOver: mode, ComparisonOption: cmp}, manifests...))
	if err != nil {
		t.Fatal(err)
	}
	res := result(t, report, c.kind, objName)
	after := get(t, c.gvr, before.GetNamespace(), objName)

	wantTaken := mode == api.WhenToTakeOverTypeAlways ||
		mode == api.WhenToTakeOverTypeIfNoDiff && (state == "same" || state == "extra" && cmp == api.ComparisonOptionTypePartialComparison)

	if len(report.Takeovers) != 1 {
		t.Fatalf("want one takeover decision, got %s", dump(report.Takeovers))
	}
	decision := report.Takeovers[0]
	if decision.Mode != mode || decision.Comparison != cmp || decision.Resource.Name != objName {
		t.Errorf("decision = %s", dump(decision))
	}

	switch {
	case wantTaken:
		if res.Applied.Status != "True" {
			t.Fatalf("want applied, got %s", dump(res))
		}
		if decision.Outcome != applier.TakenOver {
			t.Errorf("decision outcome = %q, want TakenOver", decision.Outcome)
		}
		if owners := manifest.OwnerTokens(after.GetLabels()); !slices.Equal(owners, []string{placement}) {
			t.Errorf("owners on the member = %v, want [%s]", owners, placement)
		}
		if state == "differing" && !hasValue(t, after, c.diffPath, c.hubValue) {
			t.Errorf("member keeps %s; want the hub's %s", c.diffPath, c.hubValue)
		}
		if state == "same" && after.GetGeneration() != before.GetGeneration() {
			t.Errorf("generation went from %d to %d taking over an identical object\nbefore: %s\nafter: %s", before.GetGeneration(), after.GetGeneration(), dump(before.Object["spec"]), dump(after.Object["spec"]))
		}

	case mode == api.WhenToTakeOverTypeNever:
		wantFailure(t, res, api.ManifestNotTakenOverReason, api.NotTakenOverError)
		if decision.Outcome != api.ManifestNotTakenOverReason {
			t.Errorf("decision outcome = %q", decision.Outcome)
		}
		untouched(t, before, after)

	default: // IfNoDiff refused
		wantFailure(t, res, api.ManifestFailedToTakeOverReason, api.FailedToTakeOverError)
		if decision.Outcome != api.ManifestFailedToTakeOverReason {
			t.Errorf("decision outcome = %q", decision.Outcome)
		}
		want := api.PatchDetail{Path: c.diffPath, ValueInHub: c.hubValue, ValueInMember: c.memberValue}
		if state == "extra" {
			want = api.PatchDetail{Path: c.extraPath, ValueInMember: c.extraValue}
		}
		if !slices.Contains(res.Diffs, want) || !slices.Contains(decision.Diffs, want) {
			t.Errorf("want diff %+v in the result and the decision; got %s and %s", want, dump(res.Diffs), dump(decision.Diffs))
		}
		if len(res.Diffs) != 1 {
			t.Errorf("want exactly one diff, got %s", dump(res.Diffs))
		}
		if res.FirstDiffedAt == nil {
			t.Error("firstDiffedAt is not set")
		}
		untouched(t, before, after)
	}
}

func wantFailure(t *testing.T, res events.ManifestResult, reason, text string) {
	t.Helper()
	want := events.Condition{Status: "False", Reason: reason, Message: api.ManifestApplyFailedMessage(text)}
	if res.Applied != want {
		t.Errorf("applied = %+v\nwant      %+v", res.Applied, want)
	}
}

// untouched checks that the member object was not changed at all.
func untouched(t *testing.T, before, after *unstructured.Unstructured) {
	t.Helper()
	if before.GetGeneration() != after.GetGeneration() {
		t.Errorf("the member object's spec was changed (generation %d -> %d)", before.GetGeneration(), after.GetGeneration())
	}
	for _, mf := range after.GetManagedFields() {
		if mf.Manager == applier.FieldManager {
			t.Errorf("Flotilla changed the member object: %s", dump(mf))
		}
	}
	if _, marked := after.GetLabels()[manifest.ManagedByLabel]; marked {
		t.Error("the member object carries Flotilla's mark")
	}
}

// TestServerSideApplyConflicts: with ServerSideApply, taking over a field
// another manager set to a different value fails with the server's conflict
// unless serverSideApplyConfig.force is set; ClientSideApply overwrites.
func TestServerSideApplyConflicts(t *testing.T) {
	a := newApplier(t)
	for _, c := range []struct {
		name     string
		strategy api.ApplyStrategy
		wantOK   bool
	}{
		{"ssa", api.ApplyStrategy{Type: api.ApplyStrategyTypeServerSideApply}, false},
		{"ssa-force", api.ApplyStrategy{Type: api.ApplyStrategyTypeServerSideApply, ServerSideApplyConfig: &api.ServerSideApplyConfig{ForceConflicts: true}}, true},
		{"csa", api.ApplyStrategy{Type: api.ApplyStrategyTypeClientSideApply}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := name(t, "")
			create(t, nsYAML(ns))
			create(t, configMapYAML(ns, "app-config", "member"))
			report, err := a.Apply(t.Context(), work(t, name(t, "crp"), c.strategy, configMapYAML(ns, "app-config", "hub")))
			if err != nil {
				t.Fatal(err)
			}
			res := result(t, report, "ConfigMap", "app-config")
			got := nested(t, get(t, configMaps, ns, "app-config"), "data", "key")
			if c.wantOK {
				if res.Applied.Status != "True" || got != "hub" {
					t.Errorf("want the hub's value applied; result %s, member value %v", dump(res), got)
				}
				return
			}
			if res.Applied.Reason != api.ManifestApplyFailedReason || !strings.Contains(res.Applied.Message, "conflict") || got != "member" {
				t.Errorf("want a conflict and the member's value kept; result %s, member value %v", dump(res), got)
			}
		})
	}
}

package applier_test

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/diff"
)

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// TestReportDiff reports how the member differs from the hub and changes
// nothing: a differing label, a missing object (one diff at "/"), a Secret
// whose values never appear, and an object that matches.
func TestReportDiff(t *testing.T) {
	a := newApplier(t)
	ns := name(t, "")
	nsBefore := create(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    team: blue\n", ns))
	secretBefore := create(t, fmt.Sprintf(`
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: %s}
stringData: {password: member-secret-value}
`, ns))
	cmBefore := create(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: same, namespace: %s}\ndata: {a: b}\n", ns))

	for _, cmp := range []api.ComparisonOptionType{api.ComparisonOptionTypePartialComparison, api.ComparisonOptionTypeFullComparison} {
		t.Run(string(cmp), func(t *testing.T) {
			report, err := a.Apply(t.Context(), work(t, name(t, "crp"), api.ApplyStrategy{Type: api.ApplyStrategyTypeReportDiff, ComparisonOption: cmp},
				fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    team: green\n", ns),
				fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: missing, namespace: %s}\ndata: {a: b}\n", ns),
				fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: same, namespace: %s}\ndata: {a: b}\n", ns),
				fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: %s}\nstringData: {password: hub-secret-value}\n", ns),
			))
			if err != nil {
				t.Fatal(err)
			}
			if report.DiffReported == nil || report.DiffReported.Status != "True" || report.DiffReported.Reason != api.DiffReportedStatusTrueReason {
				t.Errorf("diffReported = %s", dump(report.DiffReported))
			}

			nsRes := result(t, report, "Namespace", ns)
			want := api.PatchDetail{Path: "/metadata/labels/team", ValueInHub: "green", ValueInMember: "blue"}
			if !slices.Equal(nsRes.Diffs, []api.PatchDetail{want}) || nsRes.FirstDiffedAt == nil {
				t.Errorf("namespace diffs = %s, want [%+v] with firstDiffedAt", dump(nsRes), want)
			}
			missing := result(t, report, "ConfigMap", "missing")
			if !slices.Equal(missing.Diffs, []api.PatchDetail{{Path: "/", ValueInHub: diff.WholeObject}}) {
				t.Errorf("missing object diffs = %s", dump(missing.Diffs))
			}
			if same := result(t, report, "ConfigMap", "same"); len(same.Diffs) != 0 {
				t.Errorf("matching object has diffs %s", dump(same.Diffs))
			}
			secret := result(t, report, "Secret", "creds")
			if len(secret.Diffs) == 0 {
				t.Error("differing Secret has no diffs")
			}
			for _, d := range secret.Diffs {
				if d.ValueInHub != "" && d.ValueInHub != diff.Redacted || d.ValueInMember != "" && d.ValueInMember != diff.Redacted {
					t.Errorf("Secret value leaked in diff %+v", d)
				}
			}

			// Nothing changed on the member.
			if get(t, configMaps, ns, "missing") != nil {
				t.Error("ReportDiff created the missing object")
			}
			untouched(t, nsBefore, get(t, namespaces, "", ns))
			untouched(t, secretBefore, get(t, secrets, ns, "creds"))
			untouched(t, cmBefore, get(t, configMaps, ns, "same"))
			if label(get(t, namespaces, "", ns), "team") != "blue" {
				t.Error("ReportDiff changed the member's label")
			}
		})
	}
}

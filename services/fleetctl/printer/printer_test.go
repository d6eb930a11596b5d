package printer

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/golden"
	"github.com/flotilla-dev/flotilla/harness/seeds"
	"github.com/flotilla-dev/flotilla/services/fleetctl/internal/fleetctltest"
)

func TestParseOutput(t *testing.T) {
	tmpl := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(tmpl, []byte("{.metadata.name}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in      string
		want    Output
		wantErr string
	}{
		{in: "", want: Output{Format: Table}},
		{in: "wide", want: Output{Format: Wide}},
		{in: "yaml", want: Output{Format: YAML}},
		{in: "json", want: Output{Format: JSON}},
		{in: "name", want: Output{Format: Name}},
		{in: "jsonpath={.status.placementStatuses}", want: Output{Format: JSONPath, Template: "{.status.placementStatuses}"}},
		{in: "jsonpath-as-json={.metadata.name}", want: Output{Format: JSONPathAsJSON, Template: "{.metadata.name}"}},
		{in: "jsonpath-file=" + tmpl, want: Output{Format: JSONPath, Template: "{.metadata.name}"}},
		{in: "jsonpath=", wantErr: "needs a template"},
		{in: "jsonpath", wantErr: "needs a template"},
		{in: "jsonpath-file=/nonexistent/t.txt", wantErr: "read jsonpath template"},
		{in: "xml", wantErr: `unknown output format "xml"; use one of table, wide, yaml, json, name`},
		{in: "yaml=x", wantErr: `unknown output format "yaml=x"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseOutput(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseOutput(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseOutput(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestCheckRejectsBadTemplate(t *testing.T) {
	out, err := ParseOutput("jsonpath={.status")
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Check(); err == nil || !strings.Contains(err.Error(), "error parsing jsonpath {.status") {
		t.Fatalf("Check() = %v, want a parse error naming the template", err)
	}
}

// TestPlacements prints the same placements in every format and compares
// with golden files; the cases below the loop check what users rely on.
func TestPlacements(t *testing.T) {
	crps := fleetctltest.Placements(t)
	for _, tc := range []struct {
		name, output string
		single       bool
		noHeaders    bool
	}{
		{name: "table", output: ""},
		{name: "table-no-headers", output: "", noHeaders: true},
		{name: "wide", output: "wide"},
		{name: "yaml", output: "yaml"},
		{name: "json", output: "json"},
		{name: "name", output: "name"},
		{name: "jsonpath-names", output: `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.conditions[?(@.type=="ClusterResourcePlacementApplied")].status}{"\n"}{end}`},
		{name: "jsonpath-as-json", output: `jsonpath-as-json={.items[*].metadata.name}`},
		{name: "single-yaml", output: "yaml", single: true},
		{name: "single-json", output: "json", single: true},
		{name: "single-jsonpath-missing-key", output: "jsonpath={.status.nothing}", single: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ParseOutput(tc.output)
			if err != nil {
				t.Fatal(err)
			}
			items := crps
			if tc.single {
				items = crps[:1]
			}
			var buf bytes.Buffer
			p := Printer{Output: out, NoHeaders: tc.noHeaders, Now: clock}
			if err := p.Placements(&buf, items, tc.single); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/placements-"+tc.name+".txt", buf.Bytes())
		})
	}
}

func TestPlacementTableColumns(t *testing.T) {
	var buf bytes.Buffer
	if err := (Printer{Output: Output{Format: Table}, Now: clock}).Placements(&buf, fleetctltest.Placements(t), false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := [][]string{
		{"NAME", "GEN", "SCHEDULED", "SCHEDULED-GEN", "AVAILABLE", "AVAILABLE-GEN", "AGE"},
		{"crp-1", "1", "True", "1", "True", "1", "2d"},
		{"just-applied", "0", "<unknown>"}, // nothing reported yet: empty cells
		{"web-2-crp", "2", "True", "2", "5m"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, w) {
			t.Errorf("line %d = %q, want fields %q", i, lines[i], w)
		}
	}
}

func TestMembers(t *testing.T) {
	members := fleetctltest.Members(t)
	for _, tc := range []struct{ name, output string }{
		{"table", ""}, {"wide", "wide"}, {"yaml", "yaml"}, {"json", "json"}, {"name", "name"},
		{"jsonpath", `jsonpath={range .items[*]}{.metadata.name}={.status.properties.kubernetes-fleet\.io/node-count.value}{"\n"}{end}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ParseOutput(tc.output)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := (Printer{Output: out, Now: clock}).Members(&buf, members, false); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/members-"+tc.name+".txt", buf.Bytes())
		})
	}
}

func TestMemberTableColumns(t *testing.T) {
	var buf bytes.Buffer
	if err := (Printer{Output: Output{Format: Table}, Now: clock}).Members(&buf, fleetctltest.Members(t), false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := [][]string{
		{"NAME", "JOINED", "AGE", "NODE-COUNT", "AVAILABLE-CPU", "AVAILABLE-MEMORY"},
		{"member-1", "True", "24h", "3", "7200m", "30Gi"},
		{"member-2", "<unknown>"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, w) {
			t.Errorf("line %d = %q, want fields %q", i, lines[i], w)
		}
	}
}

// TestSeedJQCommand runs seed 000's command on the printed jsonpath output:
//
//	kubectl get clusterresourceplacement.v1beta1.placement.kubernetes-fleet.io web-2-crp -o jsonpath='{.status.placementStatuses}' \
//	    | jq '[.[] | select (.failedPlacements != null)] | map({clusterName, failedPlacements})'
//
// and checks that it prints the seed's answer: the cluster that failed, with
// its failed placement.
func TestSeedJQCommand(t *testing.T) {
	crp := fleetctltest.Placements(t)[0]
	out, err := ParseOutput("jsonpath={.status.placementStatuses}")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := (Printer{Output: out, Now: clock}).Placements(&buf, []api.ClusterResourcePlacement{crp}, true); err != nil {
		t.Fatal(err)
	}
	// kubectl prints a list as compact JSON without a trailing newline.
	if !strings.HasPrefix(buf.String(), `[{"clusterName":"member-1"`) || strings.HasSuffix(buf.String(), "\n") {
		t.Fatalf("jsonpath printed %q, want the compact JSON list", buf.String())
	}

	// The jq filter, in Go: the entries with failedPlacements.
	var statuses []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &statuses); err != nil {
		t.Fatalf("jsonpath output is not a JSON list: %v", err)
	}
	var failed []map[string]any
	for _, s := range statuses {
		if s["failedPlacements"] != nil {
			failed = append(failed, map[string]any{"clusterName": s["clusterName"], "failedPlacements": s["failedPlacements"]})
		}
	}
	if len(failed) != 1 || failed[0]["clusterName"] != "member-2" {
		t.Fatalf("filtered = %v, want member-2 only", failed)
	}
	// The entry has the seed's shape (seed 000's sample answer, with the
	// fixture's reason and message).
	var seed map[string]any
	data, err := os.ReadFile(filepath.Join("testdata", "seed-000-3.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &seed); err != nil {
		t.Fatal(err)
	}
	if got, want := shape(failed[0]), shape(seed); !reflect.DeepEqual(got, want) {
		t.Errorf("entry keys = %v, want the seed's %v", got, want)
	}

	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Log("jq is not installed; the seed's pipeline itself is not run")
		return
	}
	cmd := exec.Command(jq, `[.[] | select (.failedPlacements != null)] | map({clusterName, failedPlacements})`)
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("jq: %v", err)
	}
	golden.Check(t, "testdata/golden/seed-000-jq.json", got)
}

// shape lists the keys of a JSON object, recursively, to compare structure.
func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = shape(e)
		}
		return out
	case []any:
		if len(x) == 0 {
			return []any{}
		}
		return []any{shape(x[0])}
	}
	return "value"
}

func TestDescribePlacement(t *testing.T) {
	crps := fleetctltest.Placements(t)
	envelope := fleetctltest.Decode[api.ClusterResourcePlacement](t, "seed 003-5", seeds.Read(t, "003-5.completed.yaml"))
	for _, tc := range []struct {
		name string
		crp  api.ClusterResourcePlacement
	}{
		{"web-2-crp", crps[0]},
		{"just-applied", crps[2]},
		{"crp-envelope", envelope[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := (Printer{Now: clock}).DescribePlacement(&buf, &tc.crp); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/describe-"+tc.name+".txt", buf.Bytes())
		})
	}
}

func TestDescribeShowsWhyAClusterFailed(t *testing.T) {
	var buf bytes.Buffer
	crp := fleetctltest.Placements(t)[0]
	if err := (Printer{Now: clock}).DescribePlacement(&buf, &crp); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Cluster member-2:",
		"Failed Placements (1):",
		"v1 Namespace web-2: Applied False FailedToTakeOver: Failed to apply the manifest (error: cannot take over object",
		`/metadata/labels/team: hub "green", member "blue"`,
		"Drifted Placements (1):",
		`/spec/replicas: hub "2", member "3"`,
		"RolloutNotStartedYet",
		"ClusterResourcePlacementApplied",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("describe output lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestDescribeMember(t *testing.T) {
	m := fleetctltest.Members(t)[0]
	var buf bytes.Buffer
	if err := (Printer{Now: clock}).DescribeMember(&buf, &m); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/golden/describe-member-1.txt", buf.Bytes())
}

func historyFixture() *events.PlacementHistory {
	at := func(m int) time.Time { return now.Add(time.Duration(m) * time.Minute) }
	score := func(v int32) *int32 { return &v }
	return &events.PlacementHistory{
		Placement: "web-2-crp",
		Snapshots: []events.SnapshotRecord{
			{Index: 0, Hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", CreatedAt: at(-5),
				Resources: []api.ResourceIdentifier{{Version: "v1", Kind: "Namespace", Name: "web-2"}}},
			{Index: 1, Hash: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", CreatedAt: at(-2),
				Resources: []api.ResourceIdentifier{{Version: "v1", Kind: "Namespace", Name: "web-2"}, {Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web-2", Name: "web"}}},
		},
		Decisions: []events.DecisionRecord{
			{PolicyGeneration: 1, Cluster: "member-1", Action: "added", AffinityScore: score(0), TopologySpreadScore: score(0), Reason: "picked by scheduling policy", DecidedAt: at(-5)},
			{PolicyGeneration: 1, Cluster: "member-2", Action: "added", Reason: "picked by scheduling policy", DecidedAt: at(-5)},
		},
		Status: []events.ConditionRecord{
			{Type: "ClusterResourcePlacementScheduled", Status: "True", Reason: "SchedulingPolicyFulfilled", Message: "found all cluster needed", At: at(-5)},
			{Cluster: "member-2", Type: "Applied", Status: "False", Reason: "NotTakenOver", Message: "Failed to apply the manifest (error: no ownership of the object in the member cluster; takeover is needed)", At: at(-4)},
		},
	}
}

func TestHistory(t *testing.T) {
	for _, tc := range []struct{ name, output string }{{"table", ""}, {"wide", "wide"}, {"yaml", "yaml"}, {"json", "json"}} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ParseOutput(tc.output)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := (Printer{Output: out, Now: clock}).History(&buf, historyFixture()); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/history-"+tc.name+".txt", buf.Bytes())
		})
	}
}

func takeoversFixture() []events.TakeoverRecord {
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	return []events.TakeoverRecord{
		{Placement: "web-2-crp", Cluster: "member-2", TakeoverDecision: events.TakeoverDecision{
			Resource: ns, Mode: api.WhenToTakeOverTypeNever, Comparison: api.ComparisonOptionTypePartialComparison,
			Outcome: "NotTakenOver", DecidedAt: now.Add(-4 * time.Minute)}},
		{Placement: "web-2-crp", Cluster: "member-2", TakeoverDecision: events.TakeoverDecision{
			Resource: ns, Mode: api.WhenToTakeOverTypeIfNoDiff, Comparison: api.ComparisonOptionTypePartialComparison,
			Outcome: "FailedToTakeOver", DecidedAt: now.Add(-2 * time.Minute),
			Diffs: []api.PatchDetail{{Path: "/metadata/labels/team", ValueInHub: "green", ValueInMember: "blue"}}}},
		{Placement: "web-2-crp", Cluster: "member-2", TakeoverDecision: events.TakeoverDecision{
			Resource: ns, Mode: api.WhenToTakeOverTypeAlways, Comparison: api.ComparisonOptionTypePartialComparison,
			Outcome: "TakenOver", DecidedAt: now.Add(-1 * time.Minute)}},
	}
}

func TestTakeovers(t *testing.T) {
	for _, tc := range []struct{ name, output string }{{"table", ""}, {"yaml", "yaml"}, {"json", "json"}} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ParseOutput(tc.output)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := (Printer{Output: out, Now: clock}).Takeovers(&buf, takeoversFixture()); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/takeovers-"+tc.name+".txt", buf.Bytes())
		})
	}
}

func TestTableCellsStayOnOneLine(t *testing.T) {
	if got := cell("line one\nline two\tx"); got != "line one..." {
		t.Errorf("cell = %q", got)
	}
	if got := cell("a\tb"); got != "a b" {
		t.Errorf("cell = %q", got)
	}
}

package main

import (
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

func TestSummariseUsesNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarise(ds)
	want := stats{n: 20, p50: 10 * time.Millisecond, p90: 18 * time.Millisecond, min: time.Millisecond, max: 20 * time.Millisecond}
	if got != want {
		t.Errorf("summarise(1..20ms) = %+v, want %+v", got, want)
	}
	if ds[0] != 20*time.Millisecond {
		t.Error("summarise sorted its argument in place")
	}
}

// The end of a measured change is when the status says Applied for what was changed; an
// Applied left over from the previous generation or snapshot must not end it early.
func TestAppliedEverywhere(t *testing.T) {
	applied := func(gen int64) metav1.Condition {
		return metav1.Condition{Type: string(api.ClusterResourcePlacementAppliedConditionType), Status: metav1.ConditionTrue, ObservedGeneration: gen}
	}
	cluster := func(name, index string, gen int64) api.ResourcePlacementStatus {
		return api.ResourcePlacementStatus{ClusterName: name, ObservedResourceIndex: index, Conditions: []metav1.Condition{
			{Type: string(api.PerClusterAppliedConditionType), Status: metav1.ConditionTrue, ObservedGeneration: gen},
		}}
	}
	selected := make([]api.ResourceIdentifier, objectsPerNamespace)
	crp := func(gen int64, index string, selected []api.ResourceIdentifier, clusters ...api.ResourcePlacementStatus) *api.ClusterResourcePlacement {
		return &api.ClusterResourcePlacement{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: gen},
			Status: api.PlacementStatus{
				ObservedResourceIndex: index, SelectedResources: selected, PlacementStatuses: clusters,
				Conditions: []metav1.Condition{applied(gen)},
			},
		}
	}
	all := func(index string, gen int64) []api.ResourcePlacementStatus {
		return []api.ResourcePlacementStatus{cluster("m1", index, gen), cluster("m2", index, gen), cluster("m3", index, gen)}
	}
	stale := crp(2, "0", selected, all("0", 2)...)
	stale.Status.Conditions[0].ObservedGeneration = 1

	for _, tc := range []struct {
		name  string
		crp   *api.ClusterResourcePlacement
		after int64
		want  bool
	}{
		{"new placement applied everywhere", crp(1, "0", selected, all("0", 1)...), -1, true},
		{"applied for an older generation", stale, -1, false},
		{"on two of three members", crp(1, "0", selected, all("0", 1)[:2]...), -1, false},
		{"part of the workload selected", crp(1, "0", selected[:5], all("0", 1)...), -1, false},
		{"hub change not rolled out yet", crp(1, "0", selected, all("0", 1)...), 0, false},
		{"hub change on one member so far", crp(1, "1", selected, cluster("m1", "1", 1), cluster("m2", "0", 1), cluster("m3", "0", 1)), 0, false},
		{"hub change applied everywhere", crp(1, "1", selected, all("1", 1)...), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := appliedEverywhere(tc.crp, 3, tc.after); got != tc.want {
				t.Errorf("appliedEverywhere = %v, want %v (%s)", got, tc.want, summarize(tc.crp))
			}
		})
	}
}

// The status events carry the clusters that changed: the view puts the
// placement together, so the status event that ends a change is the one
// after which every member shows Applied.
func TestStatusViewFromChanges(t *testing.T) {
	applied := func(gen int64, status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: string(api.PerClusterAppliedConditionType), Status: status, ObservedGeneration: gen}}
	}
	placement := []metav1.Condition{{Type: string(api.ClusterResourcePlacementAppliedConditionType), Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	v := &statusView{clusters: map[string]events.ClusterStatus{}}
	first := v.apply(&events.PlacementStatusChangedV2{Placement: "p", Revision: 1, Generation: 1, ObservedResourceIndex: "0",
		SelectedResourceCount: objectsPerNamespace, ClusterCount: 2, Conditions: placement, Clusters: []events.ClusterStatus{
			{Cluster: "m1", ObservedResourceIndex: "0", Conditions: applied(1, metav1.ConditionTrue)},
			{Cluster: "m2", ObservedResourceIndex: "0", Conditions: applied(1, metav1.ConditionFalse)},
		}})
	if appliedEverywhere(first, 2, -1) {
		t.Error("applied everywhere while m2 is not")
	}
	second := v.apply(&events.PlacementStatusChangedV2{Placement: "p", Revision: 2, Generation: 1, ObservedResourceIndex: "0",
		SelectedResourceCount: objectsPerNamespace, ClusterCount: 2, Conditions: placement, Clusters: []events.ClusterStatus{
			{Cluster: "m2", ObservedResourceIndex: "0", Conditions: applied(1, metav1.ConditionTrue)},
		}})
	if !appliedEverywhere(second, 2, -1) || len(second.Status.PlacementStatuses) != 2 {
		t.Errorf("not applied everywhere after m2 applied: %+v", second.Status)
	}
}

// -requests reads the API servers' counters from their /metrics text: requests by verb and
// resource (subresource appended), watch events by kind; requests with no resource
// (/metrics itself, discovery) and other metrics are left out.
func TestParseAPICounts(t *testing.T) {
	text := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="APPLY",version="v1"} 12
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="APPLY",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="namespace",subresource="status",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 40
apiserver_request_duration_seconds_count{verb="APPLY",resource="configmaps"} 99
apiserver_watch_events_total{component="apiserver",group="",kind="ConfigMap",version="v1"} 7.5e+01
apiserver_watch_events_total{component="apiserver",group="",resource="secrets",version="v1"} 4
`
	got, err := parseAPICounts(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := apiCounts{"APPLY configmaps": 15, "PUT deployments/status": 2, "watch event ConfigMap": 75, "watch event secrets": 4}
	if !maps.Equal(got, want) {
		t.Errorf("parseAPICounts = %v, want %v", got, want)
	}
	before := apiCounts{"APPLY configmaps": 10, "watch event ConfigMap": 75}
	if d := got.since(before); !maps.Equal(d, apiCounts{"APPLY configmaps": 5, "PUT deployments/status": 2, "watch event secrets": 4}) {
		t.Errorf("since = %v", d)
	}
	if _, err := parseAPICounts(strings.NewReader(`apiserver_request_total{verb="GET",resource="pods"} x` + "\n")); err == nil {
		t.Error("a value that is not a number was accepted")
	}
}

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/golden"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/services/fleetctl/internal/fleetctltest"
)

// statusFixture starts NATS with a fake status service holding the fleet of
// fleetctltest, and returns the --nats flag for fleetctl.
func statusFixture(t *testing.T) (*fakeStatus, []string) {
	t.Helper()
	srv, nc := natsserver.StartT(t)
	f := startFakeStatus(t, nc)
	for _, p := range fleetctltest.Placements(t) {
		f.placements[p.Name] = p
	}
	for _, m := range fleetctltest.Members(t) {
		f.members[m.Name] = m
	}
	return f, []string{"--nats", srv.URL()}
}

// TestSeedCommand runs seed 000's command with fleetctl in place of kubectl:
//
//	fleetctl get clusterresourceplacement.v1beta1.placement.kubernetes-fleet.io web-2-crp -o jsonpath='{.status.placementStatuses}' \
//	    | jq '[.[] | select (.failedPlacements != null)] | map({clusterName, failedPlacements})'
func TestSeedCommand(t *testing.T) {
	_, nats := statusFixture(t)
	r := fleetctl(t, "", append([]string{"get", "clusterresourceplacement.v1beta1.placement.kubernetes-fleet.io", "web-2-crp",
		"-o", "jsonpath={.status.placementStatuses}"}, nats...)...)
	if r.e != nil {
		t.Fatalf("get: %v\n%s", r.e, r.err)
	}
	var statuses []api.ResourcePlacementStatus
	if err := json.Unmarshal([]byte(r.out), &statuses); err != nil {
		t.Fatalf("the output is not the JSON list jq reads: %v\n%s", err, r.out)
	}
	if len(statuses) != 3 {
		t.Fatalf("got %d placement statuses, want 3", len(statuses))
	}
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Skip("jq is not installed")
	}
	cmd := exec.Command(jq, `[.[] | select (.failedPlacements != null)] | map({clusterName, failedPlacements})`)
	cmd.Stdin = strings.NewReader(r.out)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("jq: %v", err)
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{{
		"clusterName": "member-2",
		"failedPlacements": []any{map[string]any{
			"condition": map[string]any{
				"lastTransitionTime": "2026-11-21T11:56:00Z",
				"message":            "Failed to apply the manifest (error: cannot take over object: configuration differences are found between the manifest object and the corresponding object in the member cluster)",
				"reason":             "FailedToTakeOver",
				"status":             "False",
				"type":               "Applied",
			},
			"kind": "Namespace", "name": "web-2", "version": "v1",
		}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jq printed:\n%s\nwant:\n%v", out.String(), want)
	}
}

func TestGet(t *testing.T) {
	_, nats := statusFixture(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"crp-table", []string{"get", "crp"}},
		{"crp-wide-selector", []string{"get", "clusterresourceplacements", "-l", "app=web-2", "-o", "wide"}},
		{"crp-yaml", []string{"get", "crp", "crp-1", "-o", "yaml"}},
		{"crp-names", []string{"get", "crp/crp-1", "crp/web-2-crp", "-o", "name"}},
		{"members-table", []string{"get", "members"}},
		{"members-json", []string{"get", "membercluster.cluster.kubernetes-fleet.io", "member-2", "-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fleetctl(t, "", append(tc.args, nats...)...)
			if r.e != nil {
				t.Fatalf("%v\n%s", r.e, r.err)
			}
			golden.Check(t, "testdata/golden/get-"+tc.name+".txt", []byte(r.out))
		})
	}
}

func TestGetMissingObjects(t *testing.T) {
	_, nats := statusFixture(t)
	r := fleetctl(t, "", append([]string{"get", "crp", "crp-1", "nope", "-o", "name"}, nats...)...)
	if r.out != "clusterresourceplacement.placement.kubernetes-fleet.io/crp-1\n" {
		t.Errorf("stdout = %q, want the placement that exists", r.out)
	}
	if r.e == nil || r.e.Error() != `clusterresourceplacement.placement.kubernetes-fleet.io "nope" not found` {
		t.Errorf("error = %v", r.e)
	}
	r = fleetctl(t, "", append([]string{"get", "members", "-l", "environment=staging"}, nats...)...)
	if r.e != nil || r.out != "" || r.err != "No resources found\n" {
		t.Errorf("empty list: %+v", r)
	}
	r = fleetctl(t, "", append([]string{"get", "members", "-l", "environment=staging", "-o", "json"}, nats...)...)
	if r.e != nil || !strings.Contains(r.out, `"kind": "List"`) {
		t.Errorf("empty list as JSON: %+v", r)
	}
	r = fleetctl(t, "", append([]string{"describe", "member", "nope"}, nats...)...)
	if r.e == nil || r.e.Error() != `membercluster.cluster.kubernetes-fleet.io "nope" not found` {
		t.Errorf("describe error = %v", r.e)
	}
}

func TestNoStatusService(t *testing.T) {
	srv, _ := natsserver.StartT(t)
	for _, args := range [][]string{{"get", "crp"}, {"describe", "crp", "web"}, {"history", "crp", "web"}, {"takeovers"}} {
		r := fleetctl(t, "", append(args, "--nats", srv.URL())...)
		if r.e == nil || !strings.Contains(r.e.Error(), "the status service is not running: nothing answers on flotilla.query.") ||
			!strings.Contains(r.e.Error(), "make run starts every service") {
			t.Errorf("fleetctl %s: error = %v, want one saying the status service is not running", strings.Join(args, " "), r.e)
		}
	}
}

func TestDescribe(t *testing.T) {
	_, nats := statusFixture(t)
	r := fleetctl(t, "", append([]string{"describe", "crp", "web-2-crp"}, nats...)...)
	if r.e != nil {
		t.Fatal(r.e)
	}
	golden.Check(t, "testdata/golden/describe-web-2-crp.txt", []byte(r.out))
	r = fleetctl(t, "", append([]string{"describe", "members"}, nats...)...)
	if r.e != nil {
		t.Fatal(r.e)
	}
	if !strings.Contains(r.out, "Name:                       member-1") || !strings.Contains(r.out, "\n\nName:") {
		t.Errorf("describe of every member:\n%s", r.out)
	}
}

func TestHistoryAndTakeovers(t *testing.T) {
	f, nats := statusFixture(t)
	decided := testNow.Add(-time.Minute)
	f.history["web-2-crp"] = events.PlacementHistory{
		Placement: "web-2-crp",
		Snapshots: []events.SnapshotRecord{{Index: 0, Hash: "9f86d081884c7d659a2feaa0c55ad015", CreatedAt: decided,
			Resources: []api.ResourceIdentifier{{Version: "v1", Kind: "Namespace", Name: "web-2"}}}},
		Decisions: []events.DecisionRecord{{PolicyGeneration: 1, Cluster: "member-2", Action: "added", Reason: "picked by scheduling policy", DecidedAt: decided}},
	}
	f.takeovers = []events.TakeoverRecord{
		{Placement: "web-2-crp", Cluster: "member-2", TakeoverDecision: events.TakeoverDecision{
			Resource: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"},
			Mode:     api.WhenToTakeOverTypeIfNoDiff, Comparison: api.ComparisonOptionTypePartialComparison,
			Outcome: "FailedToTakeOver", DecidedAt: decided,
			Diffs: []api.PatchDetail{{Path: "/metadata/labels/team", ValueInHub: "green", ValueInMember: "blue"}}}},
		{Placement: "other", Cluster: "member-1", TakeoverDecision: events.TakeoverDecision{
			Resource: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "other"},
			Mode:     api.WhenToTakeOverTypeAlways, Outcome: "TakenOver", DecidedAt: decided}},
	}

	r := fleetctl(t, "", append([]string{"history", "crp", "web-2-crp"}, nats...)...)
	if r.e != nil {
		t.Fatal(r.e)
	}
	golden.Check(t, "testdata/golden/history-web-2-crp.txt", []byte(r.out))
	r = fleetctl(t, "", append([]string{"history", "crp", "nope"}, nats...)...)
	if r.e == nil || r.e.Error() != `clusterresourceplacement.placement.kubernetes-fleet.io "nope" not found` {
		t.Errorf("history of a missing placement: %v", r.e)
	}

	r = fleetctl(t, "", append([]string{"takeovers", "--placement", "web-2-crp", "--limit", "5"}, nats...)...)
	if r.e != nil {
		t.Fatal(r.e)
	}
	golden.Check(t, "testdata/golden/takeovers-web-2-crp.txt", []byte(r.out))
	if got := f.queries[len(f.queries)-1]; got != (events.TakeoverQuery{Placement: "web-2-crp", Limit: 5}) {
		t.Errorf("query = %+v", got)
	}
	r = fleetctl(t, "", append([]string{"takeovers", "-o", "json"}, nats...)...)
	var recs []events.TakeoverRecord
	if err := json.Unmarshal([]byte(r.out), &recs); err != nil || len(recs) != 2 {
		t.Errorf("takeovers -o json = %q, %v", r.out, err)
	}
}

func TestWait(t *testing.T) {
	f, nats := statusFixture(t)
	cond := func(typ string, status metav1.ConditionStatus, gen int64, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, ObservedGeneration: gen, Reason: reason, Message: msg}
	}
	applied := string(api.ClusterResourcePlacementAppliedConditionType)
	crp := func(gen int64, conds ...metav1.Condition) api.ClusterResourcePlacement {
		return api.ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: gen}, Status: api.PlacementStatus{Conditions: conds}}
	}

	t.Run("met", func(t *testing.T) {
		f.setPlacement(crp(2, cond(applied, metav1.ConditionTrue, 2, "ApplySucceeded", "")))
		r := fleetctl(t, "", append([]string{"wait", "crp", "web", "--for=condition=Applied"}, nats...)...)
		wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/web condition met")
		r = fleetctl(t, "", append([]string{"wait", "crp/web", "--for=condition=ClusterResourcePlacementApplied=true"}, nats...)...)
		wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/web condition met")
	})

	t.Run("timeout prints the condition", func(t *testing.T) {
		f.setPlacement(crp(2, cond(applied, metav1.ConditionFalse, 2, "ApplyFailed",
			"Failed to apply resources to 1 cluster(s), please check the `failedPlacements` status")))
		r := fleetctl(t, "", append([]string{"wait", "crp", "web", "--for=condition=Applied", "--timeout=300ms", "--poll-interval=50ms"}, nats...)...)
		want := "timed out waiting for condition ClusterResourcePlacementApplied=True of clusterresourceplacement.placement.kubernetes-fleet.io/web: " +
			"ClusterResourcePlacementApplied is False (ApplyFailed: Failed to apply resources to 1 cluster(s), please check the `failedPlacements` status)"
		if r.e == nil || r.e.Error() != want {
			t.Errorf("error = %v\nwant %s", r.e, want)
		}
		r = fleetctl(t, "", append([]string{"wait", "crp", "web", "--for=condition=Applied=False"}, nats...)...)
		wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/web condition met")
	})

	t.Run("a condition of an older generation does not count", func(t *testing.T) {
		f.setPlacement(crp(3, cond(applied, metav1.ConditionTrue, 2, "ApplySucceeded", "applied")))
		r := fleetctl(t, "", append([]string{"wait", "crp", "web", "--for=condition=Applied", "--timeout=300ms", "--poll-interval=50ms"}, nats...)...)
		if r.e == nil || !strings.HasSuffix(r.e.Error(), "ClusterResourcePlacementApplied is True (ApplySucceeded: applied), observed for generation 2; the placement is at generation 3") {
			t.Errorf("error = %v", r.e)
		}
	})

	t.Run("not known yet", func(t *testing.T) {
		r := fleetctl(t, "", append([]string{"wait", "crp", "unknown", "--for=condition=Scheduled", "--timeout=200ms", "--poll-interval=50ms"}, nats...)...)
		if r.e == nil || !strings.HasSuffix(r.e.Error(), "the placement is not known to the status service yet") {
			t.Errorf("error = %v", r.e)
		}
	})

	t.Run("a status event wakes the wait", func(t *testing.T) {
		f.setPlacement(crp(4, cond(applied, metav1.ConditionFalse, 4, "ApplyPending", "")))
		done := make(chan result, 1)
		go func() {
			// Polling once an hour: only the status event can end the wait
			// before the timeout.
			done <- fleetctl(t, "", append([]string{"wait", "crp", "web", "--for=condition=Applied", "--timeout=60s", "--poll-interval=1h"}, nats...)...)
		}()
		// Whether the wait subscribed before this event or not, it sees the
		// new status: it subscribes before its first query.
		f.setPlacement(crp(4, cond(applied, metav1.ConditionTrue, 4, "ApplySucceeded", "")))
		nc := natsConnect(t, nats[1])
		for {
			if err := nc.Publish("flotilla.status.web", []byte("{}")); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-done:
				wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/web condition met")
				return
			case <-time.After(50 * time.Millisecond):
				// The wait may not have subscribed yet; say it again.
			}
		}
	})

	t.Run("delete", func(t *testing.T) {
		r := fleetctl(t, "", append([]string{"wait", "crp", "gone", "--for=delete"}, nats...)...)
		wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/gone deleted")
		r = fleetctl(t, "", append([]string{"wait", "crp", "web", "--for=delete", "--timeout=200ms", "--poll-interval=50ms"}, nats...)...)
		if r.e == nil || !strings.HasSuffix(r.e.Error(), "the placement still exists") {
			t.Errorf("error = %v", r.e)
		}
	})
}

func TestWaitWithoutStatusServiceTimesOutSayingSo(t *testing.T) {
	srv, _ := natsserver.StartT(t)
	r := fleetctl(t, "", "wait", "crp", "web", "--for=condition=Applied", "--timeout=200ms", "--poll-interval=50ms", "--nats", srv.URL())
	if r.e == nil || !strings.Contains(r.e.Error(), "timed out waiting") || !strings.Contains(r.e.Error(), "the status service is not running") {
		t.Errorf("error = %v", r.e)
	}
}

// TestWaitRightAfterApplyWaitsForTheNewSpec: the status service still shows
// the previous spec, converged; wait must not take that for the new one.
func TestWaitRightAfterApplyWaitsForTheNewSpec(t *testing.T) {
	f, nats := statusFixture(t)
	placement := func(n int) string {
		return fmt.Sprintf(`apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: scaled}
spec:
  resourceSelectors: [{group: "", version: v1, kind: Namespace, name: scaled}]
  policy: {placementType: PickN, numberOfClusters: %d}
`, n)
	}
	converged := func(yaml string) api.ClusterResourcePlacement {
		obj, err := api.Decode([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		crp := *obj.(*api.ClusterResourcePlacement)
		api.SetDefaults(&crp)
		crp.Generation = 1
		crp.Status.Conditions = []metav1.Condition{{Type: string(api.ClusterResourcePlacementAppliedConditionType),
			Status: metav1.ConditionTrue, ObservedGeneration: 1, Reason: "ApplySucceeded"}}
		return crp
	}
	f.setPlacement(converged(placement(2)))
	if r := fleetctl(t, placement(3), append([]string{"apply", "-f", "-"}, nats...)...); r.e != nil {
		t.Fatalf("apply: %v\n%s", r.e, r.err)
	}
	r := fleetctl(t, "", append([]string{"wait", "crp", "scaled", "--for=condition=Applied", "--timeout=300ms", "--poll-interval=50ms"}, nats...)...)
	if r.e == nil || !strings.HasSuffix(r.e.Error(), "the status service has not caught up with the latest spec published for the placement yet") {
		t.Fatalf("wait on the old spec: error = %v", r.e)
	}
	f.setPlacement(converged(placement(3)))
	r = fleetctl(t, "", append([]string{"wait", "crp", "scaled", "--for=condition=Applied", "--timeout=10s", "--poll-interval=50ms"}, nats...)...)
	wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/scaled condition met")
}

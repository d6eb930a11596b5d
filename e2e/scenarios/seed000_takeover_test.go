package scenarios

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/e2e/internal/seed000"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// The hub's side of seeds 000 and 002: two namespaces the placement selects by the label
// app: web-2, one with a ConfigMap in it.
const takeoverHub = `
apiVersion: v1
kind: Namespace
metadata:
  name: web-2
  labels:
    app: web-2
    team: green
---
apiVersion: v1
kind: Namespace
metadata:
  name: work-2
  labels:
    app: web-2
    team: green
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-2-settings
  namespace: web-2
data:
  color: green
`

// TestSeed000TakeoverStory plays seeds 000 and 002 (the same document in English and
// Chinese): workloads that already run on members are first only reported (Never), then
// taken over where they do not differ from the hub (IfNoDiff, with the differing field shown),
// then taken over everywhere (Always).
//
// Before Flotilla places anything, member-2 runs web-2 exactly as the hub has it and work-2
// with the label team: blue instead of green; member-3 runs web-2 with team: blue. member-1
// and member-4 run neither.
func TestSeed000TakeoverStory(t *testing.T) {
	s := fleetFor(t)
	// The audit log keeps every story told on this stack (TestSeed000OnTheHub tells it
	// with the same placement): this one's starts now.
	since := s.databaseNow(t)
	existing := map[string]map[string]string{ // member -> namespace -> team label
		"member-2": {"web-2": "green", "work-2": "blue"},
		"member-3": {"web-2": "blue"},
	}
	uids := map[string]types.UID{} // member/namespace -> uid of the pre-existing namespace
	for member, namespaces := range existing {
		for ns, team := range namespaces {
			created, err := s.member(member).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: ns, Labels: map[string]string{"app": "web-2", "team": team}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create namespace %s on %s: %v", ns, member, err)
			}
			uids[member+"/"+ns] = created.UID
		}
	}
	s.deleteAtEnd(t, "web-2-crp")

	// Step 1: check for conflicting workloads.
	s.apply(t, takeoverHub+"---"+seed000.Placement(seed000.Never))
	notTakenOver := func(name string) api.FailedResourcePlacement {
		return failure(name, api.ManifestNotTakenOverReason, seed000.NotTakenOverMessage)
	}
	s.expectFailures(t, "web-2-crp", 1, []clusterFailures{
		{ClusterName: "member-2", FailedPlacements: []api.FailedResourcePlacement{notTakenOver("web-2"), notTakenOver("work-2")}},
		{ClusterName: "member-3", FailedPlacements: []api.FailedResourcePlacement{notTakenOver("web-2")}},
	})
	crp := s.applyCondition(t, "web-2-crp", metav1.ConditionFalse)
	if got := scheduledClusters(crp); !reflect.DeepEqual(got, s.memberNames()) {
		t.Errorf("PickAll placed web-2-crp on %v, want every member %v", got, s.memberNames())
	}
	if c := meta.FindStatusCondition(crp.Status.Conditions, string(api.ClusterResourcePlacementAppliedConditionType)); c.Reason != api.ApplyFailedReason ||
		c.Message != "Failed to apply resources to 2 cluster(s), please check the `failedPlacements` status" {
		t.Errorf("ClusterResourcePlacementApplied = %s: %s", c.Reason, c.Message)
	}
	// Where nothing ran before, the namespaces and the ConfigMap are placed.
	for _, member := range []string{"member-1", "member-4"} {
		for _, ns := range []string{"web-2", "work-2"} {
			s.expectNamespaceTeam(t, member, ns, "green")
		}
		if _, err := s.member(member).CoreV1().ConfigMaps("web-2").Get(t.Context(), "web-2-settings", metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap web-2/web-2-settings on %s: %v", member, err)
		}
	}
	// What already ran is left as it was.
	s.expectExistingUntouched(t, existing, uids)

	// Step 2: take over what does not differ. The seed spells the comparison option
	// partialComparison.
	s.apply(t, seed000.Placement(seed000.IfNoDiffPartial))
	failedToTakeOver := func(name string) api.FailedResourcePlacement {
		return failure(name, api.ManifestFailedToTakeOverReason, seed000.FailedToTakeOverMessage)
	}
	s.expectFailures(t, "web-2-crp", 2, []clusterFailures{
		{ClusterName: "member-2", FailedPlacements: []api.FailedResourcePlacement{failedToTakeOver("work-2")}},
		{ClusterName: "member-3", FailedPlacements: []api.FailedResourcePlacement{failedToTakeOver("web-2")}},
	})
	crp = s.applyCondition(t, "web-2-crp", metav1.ConditionFalse)
	// Why: the differing field, with both values, for each refused takeover.
	for member, ns := range map[string]string{"member-2": "work-2", "member-3": "web-2"} {
		if err := diffedTeamLabel(clusterStatus(crp, member), ns); err != nil {
			t.Errorf("%s: %v", member, err)
		}
	}
	records := s.takeovers(t, "web-2-crp")
	if r := latestTakeover(records, "member-2", "Namespace", "web-2"); r == nil || r.Outcome != "TakenOver" || r.Mode != api.WhenToTakeOverTypeIfNoDiff {
		t.Errorf("takeover of web-2 on member-2 (identical to the hub's) = %+v, want TakenOver with IfNoDiff", r)
	}
	for member, ns := range map[string]string{"member-2": "work-2", "member-3": "web-2"} {
		r := latestTakeover(records, member, "Namespace", ns)
		if r == nil || r.Outcome != api.ManifestFailedToTakeOverReason || r.Mode != api.WhenToTakeOverTypeIfNoDiff {
			t.Errorf("takeover of %s on %s = %+v, want FailedToTakeOver with IfNoDiff", ns, member, r)
			continue
		}
		if !hasTeamDiff(r.Diffs) {
			t.Errorf("the refused takeover of %s on %s records diffs %+v, want /metadata/labels/team green (hub) vs blue (member)", ns, member, r.Diffs)
		}
	}
	s.expectExistingUntouched(t, existing, uids)

	t.Logf("fleetctl takeovers --placement web-2-crp:\n%s", s.run(t, "takeovers", "--placement", "web-2-crp"))

	// Step 3: overwrite what differs.
	s.apply(t, seed000.Placement(seed000.Always))
	crp = s.converged(t, "web-2-crp", 3)
	if f, err := s.failedPlacements(t, "web-2-crp"); err != nil || len(f) != 0 {
		t.Errorf("failedPlacements after whenToTakeOver Always: %+v %v, want none", f, err)
	}
	if got := scheduledClusters(crp); !reflect.DeepEqual(got, s.memberNames()) {
		t.Errorf("web-2-crp is on %v, want every member", got)
	}
	records = s.takeovers(t, "web-2-crp")
	for member, ns := range map[string]string{"member-2": "work-2", "member-3": "web-2"} {
		if r := latestTakeover(records, member, "Namespace", ns); r == nil || r.Outcome != "TakenOver" || r.Mode != api.WhenToTakeOverTypeAlways {
			t.Errorf("takeover of %s on %s = %+v, want TakenOver with Always", ns, member, r)
		}
	}
	for member, namespaces := range existing {
		for ns := range namespaces {
			got := s.expectNamespaceTeam(t, member, ns, "green")
			if got != nil && got.UID != uids[member+"/"+ns] {
				t.Errorf("namespace %s on %s was replaced (uid %s, was %s), not taken over", ns, member, got.UID, uids[member+"/"+ns])
			}
		}
	}
	s.expectAuditedTakeovers(t, since)
}

// expectAuditedTakeovers runs the README's "who took over what, when, and
// why" query, from since on, and checks it tells the story: refused with Never,
// refused for a difference with IfNoDiff, taken over with Always.
func (s *stack) expectAuditedTakeovers(t *testing.T, since time.Time) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), s.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to the stack's database: %v", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `
		select cluster, kind, object, mode, outcome, coalesce(diff_paths::text, '')
		from takeover_history where placement = 'web-2-crp' and cluster = 'member-3' and decided_at >= $1
		order by decided_at`, since)
	if err != nil {
		t.Fatalf("audit query: %v", err)
	}
	var story []string
	for rows.Next() {
		var cluster, kind, object, mode, outcome, diffs string
		if err := rows.Scan(&cluster, &kind, &object, &mode, &outcome, &diffs); err != nil {
			t.Fatal(err)
		}
		if object != "web-2" {
			continue
		}
		entry := mode + ":" + outcome
		if outcome == "refused" && !strings.Contains(diffs, "/metadata/labels/team") {
			t.Errorf("the refusal under %s records diff paths %s, want /metadata/labels/team", mode, diffs)
		}
		if len(story) == 0 || story[len(story)-1] != entry {
			story = append(story, entry)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"Never:not-taken-over", "IfNoDiff:refused", "Always:taken"}
	if !reflect.DeepEqual(story, want) {
		t.Errorf("takeover_history for web-2 on member-3 tells %v, want %v", story, want)
	}
	t.Logf("takeover_history for web-2 on member-3: %v", story)
}

// failure is a failed placement of namespace name as the seeds show it.
func failure(name, reason, message string) api.FailedResourcePlacement {
	return api.FailedResourcePlacement{
		ResourceIdentifier: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: name},
		Condition:          metav1.Condition{Type: "Applied", Status: metav1.ConditionFalse, Reason: reason, Message: message},
	}
}

// expectFailures waits until the seed's jq selection of the placement's status, for
// generation (or later), is want; conditions are compared on type, status, reason and
// message.
func (s *stack) expectFailures(t *testing.T, name string, generation int64, want []clusterFailures) {
	t.Helper()
	poll.Every(t, step, patience, "failedPlacements of "+name+" to be as the seed shows", func() error {
		crp, err := s.placement(t, name)
		if err != nil {
			return err
		}
		if crp.Generation < generation {
			return fmt.Errorf("the placement is at generation %d, want %d", crp.Generation, generation)
		}
		got, err := s.failedPlacements(t, name)
		if err != nil {
			return err
		}
		g, _ := yaml.Marshal(got) // as the user sees it, with times
		for i := range got {
			for j := range got[i].FailedPlacements {
				c := &got[i].FailedPlacements[j].Condition
				*c = metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
			}
		}
		if !reflect.DeepEqual(got, want) {
			w, _ := yaml.Marshal(want)
			return fmt.Errorf("got\n%s\nwant\n%s", g, w)
		}
		t.Logf("clusters with failedPlacements, as the seed's jq selects them:\n%s", g)
		return nil
	})
}

// applyCondition waits until the placement's Applied condition has status for its current
// generation.
func (s *stack) applyCondition(t *testing.T, name string, status metav1.ConditionStatus) *api.ClusterResourcePlacement {
	t.Helper()
	return s.placementWhen(t, name, fmt.Sprintf("%s to be Applied=%s", name, status), func(crp *api.ClusterResourcePlacement) error {
		c := meta.FindStatusCondition(crp.Status.Conditions, string(api.ClusterResourcePlacementAppliedConditionType))
		if c == nil || c.ObservedGeneration < crp.Generation || c.Status != status {
			return fmt.Errorf("conditions %s at generation %d", summarize(crp.Status.Conditions), crp.Generation)
		}
		return nil
	})
}

// expectNamespaceTeam checks the team label of a namespace on a member.
func (s *stack) expectNamespaceTeam(t *testing.T, member, name, team string) *corev1.Namespace {
	t.Helper()
	ns, err := s.member(member).CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("namespace %s on %s: %v", name, member, err)
		return nil
	}
	if got := ns.Labels["team"]; got != team {
		t.Errorf("namespace %s on %s has team %q, want %q", name, member, got, team)
	}
	return ns
}

// expectExistingUntouched checks that the pre-existing namespaces are the same objects with
// the labels they had.
func (s *stack) expectExistingUntouched(t *testing.T, existing map[string]map[string]string, uids map[string]types.UID) {
	t.Helper()
	for member, namespaces := range existing {
		for ns, team := range namespaces {
			got := s.expectNamespaceTeam(t, member, ns, team)
			if got != nil && got.UID != uids[member+"/"+ns] {
				t.Errorf("namespace %s on %s was replaced", ns, member)
			}
		}
	}
}

// diffedTeamLabel checks that a cluster's diffedPlacements show the namespace's team label
// as it differs: green on the hub, blue on the member.
func diffedTeamLabel(ps *api.ResourcePlacementStatus, namespace string) error {
	if ps == nil {
		return fmt.Errorf("no placement status")
	}
	for _, d := range ps.DiffedPlacements {
		if d.Kind != "Namespace" || d.Name != namespace {
			continue
		}
		if d.FirstDiffedObservedTime.IsZero() || d.ObservationTime.IsZero() {
			return fmt.Errorf("diffedPlacements entry of %s lacks its observation times: %+v", namespace, d)
		}
		if !hasTeamDiff(d.ObservedDiffs) {
			return fmt.Errorf("diffedPlacements of %s: %+v, want /metadata/labels/team valueInHub green, valueInMember blue", namespace, d.ObservedDiffs)
		}
		return nil
	}
	var listed []string
	for _, d := range ps.DiffedPlacements {
		listed = append(listed, d.Kind+"/"+d.Name)
	}
	return fmt.Errorf("diffedPlacements lists [%s], not namespace %s", strings.Join(listed, " "), namespace)
}

func hasTeamDiff(diffs []api.PatchDetail) bool {
	for _, d := range diffs {
		if d.Path == "/metadata/labels/team" && d.ValueInHub == "green" && d.ValueInMember == "blue" {
			return true
		}
	}
	return false
}

// databaseNow is the stack's database clock, which stamps the audit history.
func (s *stack) databaseNow(t *testing.T) time.Time {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), s.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to the stack's database: %v", err)
	}
	defer conn.Close(context.Background())
	var now time.Time
	if err := conn.QueryRow(t.Context(), "select now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

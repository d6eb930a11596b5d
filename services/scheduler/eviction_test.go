package scheduler_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

func (f *fixture) taint(name string, labels map[string]string, taints ...api.Taint) {
	subj, _ := events.MemberSubject(name)
	f.Publish(events.TypeMemberUpdated, subj, events.MemberUpdated{Member: api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 60, Taints: taints},
	}})
}

func (f *fixture) placeFixed(name string, clusters ...string) {
	subj, _ := events.PlacementSubject(name)
	f.Publish(events.TypePlacementUpserted, subj, events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: name}},
			Policy:            &api.PlacementPolicy{PlacementType: api.PickFixedPlacementType, ClusterNames: clusters},
		},
	}})
}

func (f *fixture) budget(name string, minAvailable int32) {
	v := intstr.FromInt32(minAvailable)
	b := &api.ClusterResourcePlacementDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: api.ClusterResourcePlacementDisruptionBudgetKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       api.PlacementDisruptionBudgetSpec{MinAvailable: &v},
	}
	p := events.DisruptionUpserted{ClusterResourcePlacementDisruptionBudget: b}
	subj, _ := events.DisruptionSubject(p.Key())
	f.Publish(events.TypeDisruptionUpserted, subj, p)
}

func (f *fixture) evict(name, placement, cluster string) {
	p := events.DisruptionUpserted{ClusterResourcePlacementEviction: &api.ClusterResourcePlacementEviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1", Kind: api.ClusterResourcePlacementEvictionKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       api.PlacementEvictionSpec{PlacementName: placement, ClusterName: cluster},
	}}
	subj, _ := events.DisruptionSubject(p.Key())
	f.Publish(events.TypeDisruptionUpserted, subj, p)
}

// placed records, as the rollout would, that the placement's work reached
// the cluster and is available there (the scheduler only reads this table).
func (f *fixture) placed(placement, cluster string, ready bool) {
	f.t.Helper()
	if _, err := f.Pool.Exec(f.t.Context(), `insert into rollout_clusters (placement, cluster, sent, ready, report)
		values ($1, $2, 'work', $3, '{"applied": {"status": "True"}, "available": {"status": "True"}}')`, placement, cluster, ready); err != nil {
		f.t.Fatal(err)
	}
}

// evicted waits for the scheduler to have run the eviction and returns it.
func (f *fixture) evicted(name string) *api.ClusterResourcePlacementEviction {
	f.t.Helper()
	var e api.ClusterResourcePlacementEviction
	poll.Until(f.t, 20*time.Second, "eviction "+name, func() error {
		var raw []byte
		err := f.Pool.QueryRow(f.t.Context(), `select object from disruptions where kind = $1 and name = $2`,
			api.ClusterResourcePlacementEvictionKind, name).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("eviction %s not run yet", name)
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &e)
	})
	return &e
}

func wantCondition(t *testing.T, e *api.ClusterResourcePlacementEviction, typ string, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	c := meta.FindStatusCondition(e.Status.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason || c.Message != message {
		t.Errorf("eviction %s: condition %s = %+v, want %s %s %q", e.Name, typ, c, status, reason, message)
	}
}

// TestEvictionUnderABudget evicts a PickN placement from a tainted cluster
// within its disruption budget (the scheduler picks a replacement), refuses
// the next eviction the budget does not allow, and refuses evictions of a
// PickFixed placement and of a placement that does not exist.
func TestEvictionUnderABudget(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	prod := map[string]string{"environment": "production"}
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		f.join(m, prod)
	}
	f.place("web", 2)
	f.latest("web", wantChosen("member-1", "member-2"))
	f.placed("web", "member-1", true)
	f.placed("web", "member-2", true)
	f.budget("web", 1)

	// Cordoned, as fleetctl drain does, so the eviction is not undone.
	f.taint("member-1", prod, api.CordonTaint)
	f.evict("drain-web-member-1", "web", "member-1")
	e := f.evicted("drain-web-member-1")
	wantCondition(t, e, api.EvictionConditionValid, metav1.ConditionTrue, api.EvictionValidReason, api.EvictionValidMessage)
	wantCondition(t, e, api.EvictionConditionExecuted, metav1.ConditionTrue, api.EvictionExecutedReason,
		"Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 2, totalPlacements: 2")
	f.latest("web", wantChosen("member-2", "member-3"))
	if e.APIVersion != "placement.kubernetes-fleet.io/v1" {
		t.Errorf("stored apiVersion %q, want the one applied", e.APIVersion)
	}
	if f.historyReason("web", "member-1", "removed") != "evicted by ClusterResourcePlacementEviction drain-web-member-1" {
		t.Errorf("history of member-1: %q", f.historyReason("web", "member-1", "removed"))
	}

	// member-3 has not received the work yet: one of two is available, and
	// minAvailable 1 allows no more.
	f.evict("evict-web-member-2", "web", "member-2")
	e = f.evicted("evict-web-member-2")
	wantCondition(t, e, api.EvictionConditionExecuted, metav1.ConditionFalse, api.EvictionNotExecutedReason,
		"Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 1, totalPlacements: 2")
	// An eviction runs once: sending it again changes nothing.
	f.evict("evict-web-member-2", "web", "member-2")
	f.placeFixed("fixed", "member-2")
	f.latest("fixed", wantChosen("member-2"))
	f.evict("evict-fixed", "fixed", "member-2")
	e = f.evicted("evict-fixed")
	wantCondition(t, e, api.EvictionConditionValid, metav1.ConditionFalse, api.EvictionInvalidReason, api.EvictionInvalidPickFixedCRPMessage)
	if c := meta.FindStatusCondition(e.Status.Conditions, api.EvictionConditionExecuted); c != nil {
		t.Errorf("an invalid eviction has Executed: %+v", c)
	}
	f.evict("evict-nothing", "missing", "member-2")
	wantCondition(t, f.evicted("evict-nothing"), api.EvictionConditionValid, metav1.ConditionFalse, api.EvictionInvalidReason,
		api.EvictionInvalidMissingCRPMessage)
	f.evict("evict-web-member-1-again", "web", "member-1")
	wantCondition(t, f.evicted("evict-web-member-1-again"), api.EvictionConditionValid, metav1.ConditionFalse, api.EvictionInvalidReason,
		api.EvictionInvalidMissingCRBMessage)

	f.latest("web", wantChosen("member-2", "member-3"))
	e = f.evicted("evict-web-member-2")
	wantCondition(t, e, api.EvictionConditionExecuted, metav1.ConditionFalse, api.EvictionNotExecutedReason,
		"Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 1, totalPlacements: 2")
}

func (f *fixture) deleteEviction(name string) {
	k := events.DisruptionKey{Kind: api.ClusterResourcePlacementEvictionKind, Name: name}
	subj, _ := events.DisruptionSubject(k)
	f.Publish(events.TypeDisruptionDeleted, subj, events.DisruptionDeleted{Object: k})
}

func (f *fixture) placeAll(name string) {
	subj, _ := events.PlacementSubject(name)
	f.Publish(events.TypePlacementUpserted, subj, events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: name}},
			Policy:            &api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
		},
	}})
}

// TestEvictionWithoutTaintAndRerun: as upstream warns, an eviction does not keep the
// scheduler from picking the cluster again: a PickAll placement evicted from an untainted
// cluster is removed from it and scheduled there again at once. An eviction runs once;
// deleted and created again, it runs again.
func TestEvictionWithoutTaintAndRerun(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	for _, m := range []string{"member-1", "member-2"} {
		f.join(m, nil)
	}
	f.placeAll("all")
	f.latest("all", wantChosen("member-1", "member-2"))
	f.placed("all", "member-1", true)
	f.placed("all", "member-2", true)
	before := f.count("all")

	f.evict("evict-all-member-1", "all", "member-1")
	wantCondition(t, f.evicted("evict-all-member-1"), api.EvictionConditionExecuted, metav1.ConditionTrue, api.EvictionExecutedReason,
		api.EvictionAllowedNoPDBMessage)
	poll.Until(t, 20*time.Second, "the removal and the new pick", func() error {
		all := f.assembled("all")
		if len(all) < before+2 {
			return fmt.Errorf("%d decisions after the eviction", len(all)-before)
		}
		removed, again := all[before], all[before+1]
		if got := chosen(removed); len(got) != 1 || got[0] != "member-2" {
			return fmt.Errorf("first decision after the eviction chose %v", got)
		}
		if got := chosen(again); len(got) != 2 {
			return fmt.Errorf("second decision after the eviction chose %v", got)
		}
		return nil
	})

	// Budget minAvailable 2 of 2 now blocks; deleting the eviction and creating it
	// again judges it anew.
	f.budget("all", 2)
	f.deleteEviction("evict-all-member-1")
	f.evict("evict-all-member-1", "all", "member-1")
	poll.Until(t, 20*time.Second, "the eviction judged again", func() error {
		e := f.evicted("evict-all-member-1")
		if c := meta.FindStatusCondition(e.Status.Conditions, api.EvictionConditionExecuted); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Executed %+v", c)
		}
		return nil
	})
	wantCondition(t, f.evicted("evict-all-member-1"), api.EvictionConditionExecuted, metav1.ConditionFalse, api.EvictionNotExecutedReason,
		"Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 2, totalPlacements: 2")
}

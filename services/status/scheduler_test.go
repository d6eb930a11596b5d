package status_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/scheduler"
)

// With the real scheduler deciding, the status shows its decision for the
// generation the status service counted, and the history its decisions.
func TestHistoryWithTheScheduler(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := f.Options()
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() { done <- scheduler.Run(ctx, scheduler.Config{Options: opts}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	})
	now := time.Now()
	f.startStatus(now)

	for _, m := range []string{"member-1", "member-2"} {
		f.publish(subject(events.MemberSubject(m)), f.event(events.TypeMemberJoined, "", now, events.MemberJoined{Member: memberCluster(m)}))
	}
	place := func(mode api.WhenToTakeOverType) {
		f.publish(subject(events.PlacementSubject("web-2-crp")),
			f.event(events.TypePlacementUpserted, "", now, events.PlacementUpserted{Placement: webPlacement(mode)}))
	}
	place(api.WhenToTakeOverTypeNever)
	// A second generation: both services must count it the same way for the
	// decision to count as current.
	place(api.WhenToTakeOverTypeIfNoDiff)

	poll.Until(f.t, time.Minute, "the placement is scheduled on both members", func() error {
		r, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
		c := meta.FindStatusCondition(r.Result.Status.Conditions, string(api.ClusterResourcePlacementScheduledConditionType))
		if r.Result.Generation != 2 || c == nil || c.Reason != api.SchedulingPolicyFulfilledReason || c.ObservedGeneration != 2 ||
			len(r.Result.Status.PlacementStatuses) != 2 {
			return fmt.Errorf("generation %d, status %s", r.Result.Generation, mustMarshal(t, r.Result.Status))
		}
		for _, ps := range r.Result.Status.PlacementStatuses {
			s := meta.FindStatusCondition(ps.Conditions, "Scheduled")
			if want := api.ScheduledMessage(ps.ClusterName, 0, 0); s == nil || s.Message != want {
				return fmt.Errorf("%s Scheduled = %+v, want message %q", ps.ClusterName, s, want)
			}
		}
		return nil
	})
	poll.Until(f.t, time.Minute, "the history holds the decisions", func() error {
		r, _ := query[events.PlacementHistory](f, events.QueryHistory, events.NameQuery{Name: "web-2-crp"})
		var added []string
		for _, d := range r.Result.Decisions {
			if d.Action == string(events.ActionAdded) {
				added = append(added, d.Cluster)
			}
		}
		slices.Sort(added)
		if !slices.Equal(added, []string{"member-1", "member-2"}) {
			return fmt.Errorf("decisions: %+v", r.Result.Decisions)
		}
		return nil
	})
}

package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/scheduler"
)

// The scheduler prunes, on its timer, evictions (each decided once, when created) and
// deleted evictions and budgets last written longer ago than --eviction-retention, and
// failover_history rows older than --failover-retention; a budget in force stays however
// old, and recent rows stay.
func TestSchedulerPrunesItsHistory(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	now := time.Now()
	old, recent := now.Add(-31*24*time.Hour), now.Add(-20*24*time.Hour)
	disruption := `insert into disruptions (kind, name, object, placement, deleted, updated_at) values ($1, $2, '{}', 'web', $3, $4)`
	for _, r := range []struct {
		kind, name string
		deleted    bool
		at         time.Time
	}{
		{"ClusterResourcePlacementEviction", "old-executed", false, old},
		{"ClusterResourcePlacementEviction", "old-deleted", true, old},
		{"ClusterResourcePlacementEviction", "recent-executed", false, recent},
		{"ClusterResourcePlacementDisruptionBudget", "old-in-force", false, old},
		{"ClusterResourcePlacementDisruptionBudget", "old-deleted-budget", true, old},
	} {
		if _, err := f.Pool.Exec(ctx, disruption, r.kind, r.name, r.deleted, r.at); err != nil {
			t.Fatal(err)
		}
	}
	failover := `insert into failover_history (placement, kind, from_cluster, message, event_id, at) select $1, 'failover', 'a', 'm', $1 || g, $2 from generate_series(1, $3) g`
	if _, err := f.Pool.Exec(ctx, failover, "old", now.Add(-100*24*time.Hour), 1200); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pool.Exec(ctx, failover, "recent", now.Add(-80*24*time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	cfg := scheduler.Config{Options: f.Options(), History: scheduler.Retention{Evictions: 30 * 24 * time.Hour}}
	cfg.Retention.Every = 50 * time.Millisecond
	f.Run("scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, cfg) })
	poll.Until(t, time.Minute, "the old rows pruned", func() error {
		var left []string
		rows, err := f.Pool.Query(ctx, `select name from disruptions order by name`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			left = append(left, name)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var oldFailovers, recentFailovers int
		if err := f.Pool.QueryRow(ctx, `select count(*) filter (where placement = 'old'), count(*) filter (where placement = 'recent') from failover_history`).
			Scan(&oldFailovers, &recentFailovers); err != nil {
			return err
		}
		if recentFailovers != 3 {
			t.Fatalf("%d recent failover_history rows left, want 3 (the default keeps 90 days)", recentFailovers)
		}
		if want := []string{"old-in-force", "recent-executed"}; !slices.Equal(left, want) || oldFailovers > 0 {
			return fmt.Errorf("disruptions left %v, want %v; %d old failover_history rows left", left, want, oldFailovers)
		}
		return nil
	})
}

func TestHistoryRetentionOutlivesTheInbox(t *testing.T) {
	cfg := scheduler.Config{History: scheduler.Retention{Evictions: 5 * 24 * time.Hour}}
	cfg.DatabaseURL, cfg.NATS.URL = "postgres://db", "nats://bus:4222"
	if err := cfg.Validate(); err == nil {
		t.Error("an eviction retention shorter than the inbox's passed")
	}
	cfg.History = scheduler.Retention{Failover: -time.Hour}
	if err := cfg.Validate(); err == nil {
		t.Error("a negative failover retention passed")
	}
	cfg.History = scheduler.Retention{}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

package status_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/status"
)

// The status service prunes, on its timer, audit_log rows received longer ago than
// --audit-retention and, like every hub service, old inbox and published outbox rows;
// recent rows stay.
func TestStatusPrunesOldRows(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	now := time.Now()
	for _, q := range []struct {
		sql string
		at  time.Time
	}{
		{`insert into audit_log (event_id, type, source, time, received_at) select 'old-' || g, 't', 's', $1, $1 from generate_series(1, 1200) g`, now.Add(-31 * 24 * time.Hour)},
		{`insert into audit_log (event_id, type, source, time, received_at) select 'recent-' || g, 't', 's', $1, $1 from generate_series(1, 5) g`, now.Add(-20 * 24 * time.Hour)},
		{`insert into inbox (consumer, event_id, handled_at) select 'status', 'old-' || g, $1 from generate_series(1, 1200) g`, now.Add(-11 * 24 * time.Hour)},
		{`insert into inbox (consumer, event_id, handled_at) select 'status', 'recent-' || g, $1 from generate_series(1, 5) g`, now.Add(-9 * 24 * time.Hour)},
		{`insert into outbox (event_id, subject, type, payload, published_at) select 'old-' || g, 'flotilla.status.x', 't', '\x7b7d', $1 from generate_series(1, 20) g`, now.Add(-3 * time.Hour)},
		{`insert into outbox (event_id, subject, type, payload, published_at) select 'recent-' || g, 'flotilla.status.x', 't', '\x7b7d', $1 from generate_series(1, 5) g`, now.Add(-time.Hour)},
	} {
		if _, err := f.Pool.Exec(ctx, q.sql, q.at); err != nil {
			t.Fatal(err)
		}
	}
	cfg := status.Config{Options: f.Options(), AuditRetention: 30 * 24 * time.Hour}
	cfg.Retention.Inbox = 10 * 24 * time.Hour
	cfg.Retention.Outbox = 2 * time.Hour
	cfg.Retention.Every = 50 * time.Millisecond
	f.Run("status", func(ctx context.Context) error { return status.Run(ctx, cfg) })
	poll.Until(t, time.Minute, "old rows pruned", func() error {
		for _, table := range []string{"audit_log", "inbox", "outbox"} {
			var old, recent int
			if err := f.Pool.QueryRow(ctx, `select count(*) filter (where event_id like 'old-%'), count(*) filter (where event_id like 'recent-%') from `+table).
				Scan(&old, &recent); err != nil {
				return err
			}
			if recent != 5 {
				t.Fatalf("%s: %d recent rows left, want 5", table, recent)
			}
			if old > 0 {
				return fmt.Errorf("%s: %d old rows left", table, old)
			}
		}
		return nil
	})
}

func TestAuditRetentionOutlivesTheInbox(t *testing.T) {
	cfg := status.Config{AuditRetention: 5 * 24 * time.Hour}
	cfg.DatabaseURL, cfg.NATS.URL = "postgres://db", "nats://bus:4222"
	if err := cfg.Validate(); err == nil {
		t.Error("an audit retention shorter than the inbox's passed")
	}
	cfg.AuditRetention = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

package retention_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/inbox"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/platform/retention"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), postgres.NewTestDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// handled inserts n inbox rows handled at the time given.
func handled(t *testing.T, pool *pgxpool.Pool, prefix string, n int, at time.Time) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `insert into inbox (consumer, event_id, handled_at)
		select 'status', $1 || g, $2 from generate_series(1, $3) g`, prefix, at, n); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Old inbox rows go, in batches, and recent ones stay, also with two replicas pruning at
// once.
func TestPruneDeletesOldRowsAndKeepsRecentOnes(t *testing.T) {
	pool := newPool(t)
	handled(t, pool, "old-", 2500, now.Add(-9*24*time.Hour))
	handled(t, pool, "recent-", 300, now.Add(-time.Hour))
	handled(t, pool, "edge-", 10, now.Add(-8*24*time.Hour+time.Minute))

	rule := inbox.Retention(8 * 24 * time.Hour)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
	)
	for range 2 {
		wg.Go(func() {
			n, err := retention.Prune(t.Context(), pool, rule, now, 100)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != 2500 {
		t.Errorf("deleted %d rows, want the 2,500 old ones", total)
	}
	if n := count(t, pool, `select count(*) from inbox where event_id like 'old-%'`); n != 0 {
		t.Errorf("%d old rows left", n)
	}
	if n := count(t, pool, `select count(*) from inbox`); n != 310 {
		t.Errorf("%d rows left, want the 310 recent ones", n)
	}
	if n, err := retention.Prune(t.Context(), pool, rule, now, 100); err != nil || n != 0 {
		t.Errorf("pruning again: %d, %v", n, err)
	}
}

// Published outbox rows go once old; rows waiting to be published and quarantined rows
// stay however old they are.
func TestOutboxPruningKeepsWhatWasNotPublished(t *testing.T) {
	pool := newPool(t)
	old, recent := now.Add(-48*time.Hour), now.Add(-time.Hour)
	insert := func(id string, created time.Time, published, quarantined *time.Time) {
		t.Helper()
		if _, err := pool.Exec(t.Context(), `
			insert into outbox (event_id, subject, type, payload, created_at, published_at, quarantined_at, quarantine_reason)
			values ($1, 'flotilla.status.web', 'io.flotilla.test.v1', '\x7b7d', $2, $3, $4, case when $4::timestamptz is null then null else 'too big' end)`,
			id, created, published, quarantined); err != nil {
			t.Fatal(err)
		}
	}
	insert("published-old", old, &old, nil)
	insert("published-recent", recent, &recent, nil)
	insert("waiting-old", old, nil, nil)
	insert("quarantined-old", old, nil, &old)
	n, err := retention.Prune(t.Context(), pool, outbox.Retention(24*time.Hour), now, 10)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want the one old published row", n, err)
	}
	rows, err := pool.Query(t.Context(), `select event_id from outbox order by event_id`)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		left = append(left, id)
	}
	if fmt.Sprint(left) != "[published-recent quarantined-old waiting-old]" {
		t.Errorf("left %v", left)
	}
}

// The pruner prunes as soon as it runs, and on its timer after that.
func TestPrunerRunsOnATimer(t *testing.T) {
	pool := newPool(t)
	handled(t, pool, "old-", 50, time.Now().Add(-48*time.Hour))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	p := &retention.Pruner{Pool: pool, Rules: []retention.Rule{inbox.Retention(24 * time.Hour)}, Every: 20 * time.Millisecond, Batch: 7}
	go func() { done <- p.Run(ctx) }()
	poll.Until(t, 10*time.Second, "the first round", func() error {
		if n := count(t, pool, `select count(*) from inbox`); n > 0 {
			return fmt.Errorf("%d rows left", n)
		}
		return nil
	})
	handled(t, pool, "later-", 5, time.Now().Add(-48*time.Hour))
	poll.Until(t, 10*time.Second, "a later round", func() error {
		if n := count(t, pool, `select count(*) from inbox`); n > 0 {
			return fmt.Errorf("%d rows left", n)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v when stopped", err)
	}
}

// A rule with Where prunes only the old rows it admits.
func TestPruneKeepsOldRowsWhereDoesNotAdmit(t *testing.T) {
	pool := newPool(t)
	handled(t, pool, "old-done-", 30, now.Add(-48*time.Hour))
	handled(t, pool, "old-kept-", 5, now.Add(-48*time.Hour))
	handled(t, pool, "recent-done-", 5, now.Add(-time.Hour))
	rule := retention.Rule{Table: "inbox", Column: "handled_at", Keep: 24 * time.Hour, Where: "event_id like '%done%'"}
	n, err := retention.Prune(t.Context(), pool, rule, now, 7)
	if err != nil || n != 30 {
		t.Fatalf("pruned %d, %v; want the 30 old rows Where admits", n, err)
	}
	if n := count(t, pool, `select count(*) from inbox where event_id like 'old-kept-%'`); n != 5 {
		t.Errorf("%d of the 5 old rows Where does not admit left", n)
	}
}

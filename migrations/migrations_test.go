package migrations_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/migrations"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// emptyDB returns a database with no schema at all on the shared test server.
func emptyDB(t *testing.T) string {
	t.Helper()
	srv := postgres.SharedServer(t)
	url, err := srv.NewDatabase(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return url
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// schema lists the tables and views in public, to compare before and after a migration.
func schema(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `
		select table_type || ' ' || table_name from information_schema.tables
		where table_schema = 'public' order by table_name`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestMigrateCreatesTheSchema(t *testing.T) {
	t.Parallel()
	conn := connect(t, emptyDB(t))
	if err := migrations.Migrate(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	current, latest, err := migrations.Version(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if current != latest || latest < 1 {
		t.Fatalf("after Migrate the database is at version %d of %d", current, latest)
	}
	have := map[string]bool{}
	for _, n := range schema(t, conn) {
		have[n] = true
	}
	for _, want := range []string{
		"BASE TABLE placements", "BASE TABLE policy_snapshots", "BASE TABLE resource_snapshots",
		"BASE TABLE member_clusters", "BASE TABLE scheduling_decisions", "BASE TABLE apply_results",
		"BASE TABLE takeover_decisions", "BASE TABLE drift_reports", "BASE TABLE placement_status",
		"BASE TABLE placement_status_transitions", "BASE TABLE audit_log", "BASE TABLE inbox",
		"BASE TABLE outbox", "BASE TABLE work_blobs",
		"VIEW takeover_history", "VIEW drift_this_week", "VIEW apply_results_latest", "VIEW outbox_quarantine",
	} {
		if !have[want] {
			t.Errorf("schema lacks %s", want)
		}
	}
	// Dead letters are kept in JetStream only (013_drop_dead_letters.sql).
	if have["BASE TABLE dead_letters"] {
		t.Error("schema still has the dead_letters table")
	}
}

func TestMigrateTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	conn := connect(t, emptyDB(t))
	if err := migrations.Migrate(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	before := schema(t, conn)
	if _, err := conn.Exec(t.Context(), `insert into inbox (consumer, event_id) values ('status', 'e-1')`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Migrate(t.Context(), conn); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	after := schema(t, conn)
	if len(before) != len(after) {
		t.Fatalf("second Migrate changed the schema:\nbefore %v\nafter  %v", before, after)
	}
	var n int
	if err := conn.QueryRow(t.Context(), `select count(*) from inbox`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("second Migrate lost data: %d inbox rows, err %v", n, err)
	}
}

func TestConcurrentMigrationsAreSafe(t *testing.T) {
	t.Parallel()
	url := emptyDB(t)
	const replicas = 4
	conns := make([]*pgx.Conn, replicas)
	for i := range conns {
		conns[i] = connect(t, url)
	}
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i, c := range conns {
		wg.Go(func() { errs[i] = migrations.Migrate(t.Context(), c) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	current, latest, err := migrations.Version(t.Context(), conns[0])
	if err != nil {
		t.Fatal(err)
	}
	if current != latest {
		t.Fatalf("after concurrent migrations the database is at version %d of %d", current, latest)
	}
}

func TestMigratePool(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), emptyDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := migrations.MigratePool(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `select 1 from placements`); err != nil {
		t.Fatalf("placements not queryable through the pool after MigratePool: %v", err)
	}
}

func TestInboxMakesRedeliveryANoOp(t *testing.T) {
	t.Parallel()
	conn := connect(t, postgres.NewTestDB(t))
	for i, want := range []int64{1, 0} {
		tag, err := conn.Exec(t.Context(),
			`insert into inbox (consumer, event_id) values ('scheduler', 'ev-1') on conflict do nothing`)
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() != want {
			t.Fatalf("delivery %d: %d rows inserted, want %d", i+1, tag.RowsAffected(), want)
		}
	}
}

func TestAuditLogStoresAnEventOnce(t *testing.T) {
	t.Parallel()
	conn := connect(t, postgres.NewTestDB(t))
	insert := `insert into audit_log (event_id, type, source, subject, time, payload)
		values ('ev-1', 'io.flotilla.placement.created.v1', 'fleetctl', 'web', now(), '{"a":1}')`
	if _, err := conn.Exec(t.Context(), insert); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), insert); err == nil {
		t.Fatal("the same event id was stored twice in the audit log")
	}
}

func TestTakeoverHistoryView(t *testing.T) {
	t.Parallel()
	conn := connect(t, postgres.NewTestDB(t))
	_, err := conn.Exec(t.Context(), `
		insert into takeover_decisions
			(placement, cluster, api_group, version, kind, namespace, name, mode, comparison, outcome, diff_paths, event_id, decided_at)
		values
			('web', 'member-1', 'apps', 'v1', 'Deployment', 'shop', 'frontend', 'IfNoDiff', 'partialComparison', 'refused',
			 '[{"path":"/spec/replicas","desired":3,"live":5}]', 'ev-1', now() - interval '1 hour'),
			('web', 'member-2', '', 'v1', 'Namespace', '', 'shop', 'Always', '', 'taken', '[]', 'ev-2', now())`)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(t.Context(), `select cluster, api_version, object, outcome from takeover_history`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Cluster, APIVersion, Object, Outcome string }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{"member-2", "v1", "shop", "taken"},
		{"member-1", "apps/v1", "shop/frontend", "refused"},
	}
	if len(got) != len(want) {
		t.Fatalf("takeover_history = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("takeover_history[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestDriftThisWeekLeavesOutOldDrift(t *testing.T) {
	t.Parallel()
	conn := connect(t, postgres.NewTestDB(t))
	_, err := conn.Exec(t.Context(), `
		insert into drift_reports
			(placement, cluster, version, kind, namespace, name, drifts, event_id, first_observed_at, last_observed_at)
		values
			('web', 'member-1', 'v1', 'ConfigMap', 'shop', 'recent', '[]', 'ev-1', now() - interval '2 days', now() - interval '1 day'),
			('web', 'member-2', 'v1', 'ConfigMap', 'shop', 'old', '[]', 'ev-2', now() - interval '30 days', now() - interval '20 days')`)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(t.Context(), `select cluster from drift_this_week`)
	if err != nil {
		t.Fatal(err)
	}
	clusters, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters) != 1 || clusters[0] != "member-1" {
		t.Fatalf("drift_this_week lists %v, want only member-1", clusters)
	}
}

func TestOutboxInsertWakesTheRelay(t *testing.T) {
	t.Parallel()
	url := postgres.NewTestDB(t)
	listener := connect(t, url)
	if _, err := listener.Exec(t.Context(), `listen flotilla_outbox`); err != nil {
		t.Fatal(err)
	}
	writer := connect(t, url)
	_, err := writer.Exec(t.Context(), `
		insert into outbox (event_id, subject, type, payload)
		values ('ev-1', 'flotilla.placement.scheduled.web', 'io.flotilla.placement.scheduled.v1', '\x7b7d')`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("no notification after an outbox insert: %v", err)
	}
	if n.Channel != "flotilla_outbox" {
		t.Fatalf("notification on %q", n.Channel)
	}
	var pending int
	if err := writer.QueryRow(t.Context(), `select count(*) from outbox where published_at is null`).Scan(&pending); err != nil || pending != 1 {
		t.Fatalf("pending outbox rows = %d, err %v", pending, err)
	}
}

// The README's example queries are what users copy: they must run against the schema.
func TestReadmeQueriesRun(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, postgres.NewTestDB(t))
	blocks := strings.Split(string(readme), "```sql\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("README has no sql examples")
	}
	for _, b := range blocks {
		query, _, _ := strings.Cut(b, "```")
		rows, err := conn.Query(t.Context(), query)
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			t.Errorf("README query fails: %v\n%s", err, query)
		}
	}
}

// Quarantined outbox rows leave the publish queue and show in outbox_quarantine; a subject's
// rows share one relay partition.
func TestOutboxQuarantineView(t *testing.T) {
	t.Parallel()
	conn := connect(t, postgres.NewTestDB(t))
	_, err := conn.Exec(t.Context(), `
		insert into outbox (event_id, subject, type, payload, size, quarantined_at, quarantine_reason)
		values ('ev-1', 'flotilla.work.m1.web', 'io.flotilla.work.desired.v1', '\x7b7d', 2000000, now(), 'too big'),
		       ('ev-2', 'flotilla.work.m1.web', 'io.flotilla.work.desired.v1', '\x7b7d', 2, null, null)`)
	if err != nil {
		t.Fatal(err)
	}
	var eventID, reason string
	var size, attempts int
	var firstFailed, lastFailed *time.Time
	err = conn.QueryRow(t.Context(), `select event_id, reason, size, attempts, first_failed_at, last_failed_at from outbox_quarantine`).
		Scan(&eventID, &reason, &size, &attempts, &firstFailed, &lastFailed)
	if err != nil {
		t.Fatal(err)
	}
	if eventID != "ev-1" || reason != "too big" || size != 2000000 || attempts != 0 || firstFailed == nil || lastFailed == nil {
		t.Fatalf("outbox_quarantine = %s %q %d bytes %d attempts, failed %v..%v", eventID, reason, size, attempts, firstFailed, lastFailed)
	}
	var partitions, queued int
	if err := conn.QueryRow(t.Context(), `
		select count(distinct relay_partition), count(*) filter (where quarantined_at is null)
		from outbox where relay_partition between 0 and 15`).Scan(&partitions, &queued); err != nil {
		t.Fatal(err)
	}
	if partitions != 1 || queued != 1 {
		t.Fatalf("%d partitions for one subject, %d rows queued; want 1 and 1", partitions, queued)
	}
}

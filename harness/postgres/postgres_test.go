package postgres_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flotilla-dev/flotilla/harness/postgres"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestNewTestDBHoldsTheMigratedSchema(t *testing.T) {
	t.Parallel()
	conn := connect(t, postgres.NewTestDB(t))
	var n int
	err := conn.QueryRow(t.Context(), `
		select count(*) from information_schema.tables
		where table_schema = 'public' and table_name in ('placements', 'audit_log', 'inbox', 'outbox')`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("fresh database has %d of the 4 expected tables", n)
	}
}

func TestNewTestDBGivesEachTestItsOwnDatabase(t *testing.T) {
	t.Parallel()
	a := connect(t, postgres.NewTestDB(t))
	b := connect(t, postgres.NewTestDB(t))
	if _, err := a.Exec(t.Context(), `insert into inbox (consumer, event_id) values ('c', 'e1')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(t.Context(), `select count(*) from inbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a row written to one test database is visible in another (%d rows)", n)
	}
}

func TestStopEndsTheServerAndRemovesItsFiles(t *testing.T) {
	t.Parallel()
	srv, err := postgres.Start(t.Context(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second server: PostgreSQL %s on port %d, up in %s", srv.Version(), srv.Port(), srv.StartDuration())
	conn := connect(t, srv.URL())
	var dataDir string
	if err := conn.QueryRow(t.Context(), `show data_directory`).Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	for _, setting := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(t.Context(), "show "+setting).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "off" {
			t.Errorf("%s = %s, want off", setting, v)
		}
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s still exists after Stop (stat: %v)", dataDir, err)
	}
	if c, err := pgx.Connect(t.Context(), srv.URL()); err == nil {
		c.Close(t.Context())
		t.Fatal("server still accepts connections after Stop")
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestExternalServerCleansUpItsDatabases(t *testing.T) {
	t.Parallel()
	shared := postgres.SharedServer(t)
	ext, err := postgres.Start(t.Context(), postgres.Options{URL: shared.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if !ext.External() {
		t.Fatal("a server named by URL should be external")
	}
	created := false
	err = ext.CreateTemplate(t.Context(), "tpl", func(ctx context.Context, c *pgx.Conn) error {
		created = true
		_, err := c.Exec(ctx, `create table marker (x int); insert into marker values (42)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.CreateTemplate(t.Context(), "tpl", func(context.Context, *pgx.Conn) error {
		return errors.New("template migrated twice")
	}); err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Fatal("migrate func was not called")
	}
	dbURL, err := ext.NewDatabase(t.Context(), "tpl")
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dbURL)
	var x int
	if err := conn.QueryRow(t.Context(), `select x from marker`).Scan(&x); err != nil || x != 42 {
		t.Fatalf("clone does not hold the template's data: x=%d err=%v", x, err)
	}
	conn.Close(t.Context())

	if err := ext.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = pgx.Connect(t.Context(), dbURL)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		t.Fatalf("database from an external server still exists after Stop: %v", err)
	}
}

func TestMissingBinariesSayHowToInstallThem(t *testing.T) {
	t.Parallel()
	_, err := postgres.FindBinDir(t.TempDir())
	if err == nil {
		t.Fatal("an empty directory was accepted as holding PostgreSQL")
	}
	for _, want := range []string{"apt-get install -y postgresql", postgres.EnvURL} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestNewDatabaseNeedsAKnownTemplate(t *testing.T) {
	t.Parallel()
	if _, err := postgres.SharedServer(t).NewDatabase(t.Context(), "no-such-template"); err == nil {
		t.Fatal("NewDatabase from an unknown template succeeded")
	}
}

func TestRootNeedsAReachableDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	t.Parallel()
	_, err := postgres.Start(t.Context(), postgres.Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("Start in an unreachable directory: %v", err)
	}
}

// reachableTempDir is a temporary directory the server's user can reach when the tests run as
// root (a t.TempDir() is not: its parents are 0700).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/tmp", "flotilla-pg-datadir-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestDataDirKeepsTheClusterAcrossRestarts(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(reachableTempDir(t), "postgres")
	if err := postgres.Reachable(filepath.Dir(dataDir)); err != nil {
		t.Fatal(err)
	}

	first, err := postgres.Start(t.Context(), postgres.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Stop() })
	dbURL, err := first.EnsureDatabase(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dbURL)
	if _, err := conn.Exec(t.Context(), `create table orders (id int); insert into orders values (7)`); err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := conn.QueryRow(t.Context(), `show fsync`).Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync != "on" {
		t.Errorf("a persistent server runs with fsync = %s", fsync)
	}
	conn.Close(t.Context())
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.Connect(t.Context(), dbURL); err == nil {
		c.Close(t.Context())
		t.Fatal("server still accepts connections after Stop")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "data", "PG_VERSION")); err != nil {
		t.Fatalf("Stop removed the cluster: %v", err)
	}

	// A lock left by a killed server, whose pid now belongs to another program, must not keep
	// the server down.
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	lock := filepath.Join(dataDir, "data", "postmaster.pid")
	if err := os.WriteFile(lock, []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	second, err := postgres.Start(t.Context(), postgres.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Stop() })
	t.Logf("restarted on port %d (was %d) in %s", second.Port(), first.Port(), second.StartDuration())
	if second.Port() != first.Port() {
		t.Errorf("the restarted server listens on %d, not on its previous port %d", second.Port(), first.Port())
	}
	again, err := second.EnsureDatabase(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	var id int
	if err := connect(t, again).QueryRow(t.Context(), `select id from orders`).Scan(&id); err != nil || id != 7 {
		t.Fatalf("the row written before the restart is gone: id=%d err=%v", id, err)
	}
}

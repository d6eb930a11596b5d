package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/harness/postgres"
)

// TestFaultsTakeTheServerAwayAndBringItBack: a halted server refuses connections and comes
// back on its port with its data; a frozen one answers nothing until thawed.
func TestFaultsTakeTheServerAwayAndBringItBack(t *testing.T) {
	t.Parallel()
	srv := postgres.StartT(t)
	url, err := srv.EnsureDatabase(t.Context(), "faults")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, url).Exec(t.Context(), "create table kept (v int); insert into kept values (42)"); err != nil {
		t.Fatal(err)
	}
	ping := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		conn, err := pgxConnect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		return conn.Ping(ctx)
	}

	if err := srv.Halt(); err != nil {
		t.Fatal(err)
	}
	if err := ping(5 * time.Second); err == nil {
		t.Fatal("a halted server answered")
	}
	if err := srv.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := connect(t, url).QueryRow(t.Context(), "select v from kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("data after Resume: %d, %v", v, err)
	}

	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := ping(500 * time.Millisecond); err == nil {
		t.Fatal("a frozen server answered")
	}
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := ping(10 * time.Second); err != nil {
		t.Fatalf("a thawed server: %v", err)
	}
	// Stop works on a frozen server too.
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
}

func pgxConnect(ctx context.Context, url string) (*pgx.Conn, error) { return pgx.Connect(ctx, url) }

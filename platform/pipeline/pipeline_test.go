package pipeline_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/pipeline"
)

func scratch(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := servicetest.New(t).Pool
	if _, err := pool.Exec(t.Context(), `create table pipeline_test (n int primary key, v text not null)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

func inTx(t *testing.T, pool *pgxpool.Pool, fn func(context.Context, *pipeline.Tx) error) error {
	t.Helper()
	return pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error { return fn(t.Context(), pipeline.New(tx)) })
}

func TestReadsSeeTheWritesQueuedBeforeThem(t *testing.T) {
	pool := scratch(t)
	err := inTx(t, pool, func(ctx context.Context, w *pipeline.Tx) error {
		for round := range 3 {
			w.Queue("first", `insert into pipeline_test (n, v) values ($1, 'a')`, round*10+1)
			// A write that depends on the one before it in the queue.
			if _, err := w.Exec(ctx, `update pipeline_test set v = v || 'b' where n = $1`, round*10+1); err != nil {
				return err
			}
			if w.Pending() != 2 {
				t.Errorf("round %d: %d writes pending, want 2", round, w.Pending())
			}
			var v string
			if err := w.QueryRow(ctx, `select v from pipeline_test where n = $1`, []any{round*10 + 1}, &v); err != nil {
				return err
			}
			if v != "ab" || w.Pending() != 0 {
				t.Errorf("round %d: read %q with %d pending, want %q with none", round, v, w.Pending(), "ab")
			}
		}
		w.Queue("last", `insert into pipeline_test (n, v) values (99, 'z')`)
		var ns []int
		if err := w.Query(ctx, `select n from pipeline_test order by n`, nil, func(r pgx.Rows) error {
			var n int
			err := r.Scan(&n)
			ns = append(ns, n)
			return err
		}); err != nil {
			return err
		}
		if want := []int{1, 11, 21, 99}; !slices.Equal(ns, want) {
			t.Errorf("rows %v, want %v", ns, want)
		}
		w.Queue("after", `insert into pipeline_test (n, v) values (100, 'y')`)
		return w.Flush(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `select count(*) from pipeline_test`).Scan(&n); err != nil || n != 5 {
		t.Errorf("%d rows committed (%v), want 5", n, err)
	}
}

func TestAFailedWriteFailsTheReadItWentWithAndNamesIt(t *testing.T) {
	pool := scratch(t)
	err := inTx(t, pool, func(ctx context.Context, w *pipeline.Tx) error {
		w.Queue("store row 1", `insert into pipeline_test (n, v) values (1, 'a')`)
		w.Queue("store row 1 again", `insert into pipeline_test (n, v) values (1, 'b')`)
		var v string
		return w.QueryRow(ctx, `select v from pipeline_test where n = 1`, nil, &v)
	})
	if err == nil || !strings.Contains(err.Error(), "store row 1 again: ") || !strings.Contains(err.Error(), "duplicate key") {
		t.Fatalf("got %v, want the second write named with its duplicate key error", err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `select count(*) from pipeline_test`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows left by the failed transaction (%v), want none", n, err)
	}
}

func TestNoRowsAndDirectAfterQueuedWrites(t *testing.T) {
	pool := scratch(t)
	err := inTx(t, pool, func(ctx context.Context, w *pipeline.Tx) error {
		w.Queue("store", `insert into pipeline_test (n, v) values (1, 'a')`)
		var v string
		if err := w.QueryRow(ctx, `select v from pipeline_test where n = 2`, nil, &v); err != pgx.ErrNoRows {
			t.Errorf("reading a missing row: %v, want pgx.ErrNoRows", err)
		}
		w.Queue("store", `insert into pipeline_test (n, v) values (2, 'b')`)
		tx, err := w.Direct(ctx)
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `select count(*) from pipeline_test`).Scan(&n); err != nil || n != 2 {
			t.Errorf("the transaction itself sees %d rows (%v), want the 2 queued before Direct", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

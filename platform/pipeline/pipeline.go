// Package pipeline sends a transaction's writes to PostgreSQL together with
// its next read. A consumer that handles an event in a dozen statements, most
// of them writes whose results it does not look at, then waits for one round
// trip per read instead of one per statement. On a busy machine each round
// trip costs two wake-ups (the backend's and the caller's), which is most of
// what a small transaction takes.
//
// The statements run in the order they were issued, in the same transaction,
// so a read sees every write queued before it. A queued write that fails
// fails the read it went with (or Flush), with the write named in the error;
// the transaction is aborted then, as it would have been.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tx queues writes on a transaction until its next read or Flush.
type Tx struct {
	tx    pgx.Tx
	queue *pgx.Batch
	what  []string
}

// New returns a Tx on tx; nothing is queued.
func New(tx pgx.Tx) *Tx { return &Tx{tx: tx} }

// Queue adds a write; what names it in an error.
func (t *Tx) Queue(what, sql string, args ...any) {
	t.queue0().Queue(sql, args...)
	t.what = append(t.what, what)
}

// Exec queues sql as Queue does, named by its first words, so that a Tx can
// stand where a statement's result is not read (outbox.Execer). The command
// tag it returns is empty: a caller that needs the rows affected must use
// QueryRow.
func (t *Tx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.Queue(firstWords(sql, 4), sql, args...)
	return pgconn.CommandTag{}, nil
}

// Pending is the number of queued writes.
func (t *Tx) Pending() int { return len(t.what) }

// QueryRow sends the queued writes and then sql, in one round trip, and scans
// the one row sql returns into dest (pgx.ErrNoRows when it returns none).
func (t *Tx) QueryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	r := &Row{SQL: sql, Args: args, Dest: dest}
	if err := t.Read(ctx, r); err != nil {
		return err
	}
	return r.Err
}

// Row is a query that returns one row, read with others by Read.
type Row struct {
	SQL  string
	Args []any
	Dest []any
	// Err is pgx.ErrNoRows once read if the query returned no row.
	Err error
}

// Read sends the queued writes and then each row's query, in one round trip,
// and scans each row into its Dest. A query that returns no row sets its
// Err; any other error fails the Read.
func (t *Tx) Read(ctx context.Context, rows ...*Row) error {
	if len(rows) == 0 {
		return t.Flush(ctx)
	}
	if len(t.what) == 0 && len(rows) == 1 {
		r := rows[0]
		err := t.tx.QueryRow(ctx, r.SQL, r.Args...).Scan(r.Dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			r.Err, err = err, nil
		}
		return err
	}
	for _, r := range rows {
		t.queue0().Queue(r.SQL, r.Args...)
	}
	br, err := t.send(ctx)
	if err != nil {
		return err
	}
	for _, r := range rows {
		err := br.QueryRow().Scan(r.Dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			r.Err, err = err, nil
		}
		if err != nil {
			br.Close()
			return err
		}
	}
	return br.Close()
}

// Query sends the queued writes and then sql, in one round trip, and hands
// each row sql returns to each.
func (t *Tx) Query(ctx context.Context, sql string, args []any, each func(pgx.Rows) error) error {
	if len(t.what) == 0 {
		rows, err := t.tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		return eachRow(rows, each)
	}
	t.queue0().Queue(sql, args...)
	br, err := t.send(ctx)
	if err != nil {
		return err
	}
	rows, err := br.Query()
	if err == nil {
		err = eachRow(rows, each)
	}
	if err != nil {
		br.Close()
		return err
	}
	return br.Close()
}

// Flush sends the queued writes, if any, and waits for them.
func (t *Tx) Flush(ctx context.Context) error {
	if len(t.what) == 0 {
		return nil
	}
	br, err := t.send(ctx)
	if err != nil {
		return err
	}
	return br.Close()
}

// Direct flushes the queued writes and returns the transaction, for code that
// works on it directly.
func (t *Tx) Direct(ctx context.Context) (pgx.Tx, error) {
	if err := t.Flush(ctx); err != nil {
		return nil, err
	}
	return t.tx, nil
}

// queue0 is the batch queued, made if need be.
func (t *Tx) queue0() *pgx.Batch {
	if t.queue == nil {
		t.queue = &pgx.Batch{}
	}
	return t.queue
}

// send sends the batch queued: the writes, then any reads queued after them
// (not in what). It reads the writes' results; the caller reads the others
// and closes the results.
func (t *Tx) send(ctx context.Context) (pgx.BatchResults, error) {
	// The results read the batch as they come: it is not reused.
	q, what := t.queue, t.what
	t.queue, t.what = nil, nil
	br := t.tx.SendBatch(ctx, q)
	for _, w := range what {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("%s: %w", w, err)
		}
	}
	return br, nil
}

func eachRow(rows pgx.Rows, each func(pgx.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// firstWords is sql's first n words, to name a statement.
func firstWords(sql string, n int) string {
	f := strings.Fields(sql)
	return strings.Join(f[:min(n, len(f))], " ")
}

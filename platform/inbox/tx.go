package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A batch's transaction begins with its inbox claim in one round trip to PostgreSQL:
// pgx's Begin waits for BEGIN's answer before the claim can go, and every consumer on the
// way from a placement to its status (scheduler, rollout, status) pays that wait once per
// batch, the more so when PostgreSQL's backends wait for a CPU. claimTx is the
// transaction so begun: pgx.Tx over the connection, which pgx cannot adopt as its own.

const claimSQL = `
	insert into inbox (consumer, event_id) select $1, unnest($2::text[])
	on conflict do nothing
	returning event_id`

// beginClaim begins a transaction on a connection of pool and claims the inbox rows of
// ids in it, returning the ids claimed (those not handled before).
func beginClaim(ctx context.Context, pool *pgxpool.Pool, consumer string, ids []string) (*claimTx, []string, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	tx := &claimTx{pc: c, conn: c.Conn()}
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(claimSQL, consumer, ids)
	br := tx.conn.SendBatch(ctx, b)
	_, err = br.Exec()
	var claimed []string
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			claimed, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tx.end(ctx)
		return nil, nil, fmt.Errorf("claim inbox rows: %w", err)
	}
	return tx, claimed, nil
}

// claimTx is a transaction begun by beginClaim. Commit or end releases its connection.
type claimTx struct {
	pc     *pgxpool.Conn
	conn   *pgx.Conn
	closed bool
}

var _ pgx.Tx = (*claimTx)(nil)

// end rolls the transaction back unless it was committed, and gives the connection back
// to the pool (which closes one whose transaction could not be ended). Safe to call twice.
func (t *claimTx) end(ctx context.Context) {
	if t.pc == nil {
		return
	}
	if !t.closed {
		_ = t.Rollback(ctx)
	}
	t.pc.Release()
	t.pc = nil
}

// Begin is refused: the consumers' handlers do not nest transactions.
func (t *claimTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("inbox: a nested transaction in a batch is not supported")
}

// Commit commits, as pgx's does: a transaction that failed is rolled back by COMMIT, and
// that is an error (pgx.ErrTxCommitRollback).
func (t *claimTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	tag, err := t.conn.Exec(ctx, "commit")
	t.closed = true
	if err != nil {
		if t.conn.PgConn().TxStatus() != 'I' {
			_ = t.conn.Close(ctx) // unknown state: never back to the pool
		}
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *claimTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	_, err := t.conn.Exec(ctx, "rollback")
	t.closed = true
	if err != nil {
		_ = t.conn.Close(ctx) // unknown state: never back to the pool
	}
	return err
}

func (t *claimTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if t.closed {
		return 0, pgx.ErrTxClosed
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *claimTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects are not used by any consumer; pgx builds them for its own transactions only.
func (t *claimTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *claimTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *claimTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *claimTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *claimTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *claimTx) Conn() *pgx.Conn { return t.conn }

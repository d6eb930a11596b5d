// Package retention keeps append-mostly tables bounded: rows older than a table's
// retention are deleted in batches of bounded size, each batch its own short statement,
// on a timer. Several replicas may prune one table at once: each batch skips the rows
// another holds.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Rule is one table's retention: rows whose Column is older than Keep (and that Where
// admits, when it is set) are deleted. Table, Column and Where are SQL from code, never
// from input; Column should be indexed (a batch then reads only the rows it deletes), and
// a row whose Column is null is kept.
type Rule struct {
	Table, Column string
	Keep          time.Duration
	// Where, when set, is a condition on the table's columns a row must also meet: only
	// the rows that are done with (a deleted object, a decided eviction) may go.
	Where string
}

func (r Rule) String() string {
	if r.Where != "" {
		return fmt.Sprintf("%s (%s older than %s, where %s)", r.Table, r.Column, r.Keep, r.Where)
	}
	return fmt.Sprintf("%s (%s older than %s)", r.Table, r.Column, r.Keep)
}

// Defaults of Pruner.
const (
	DefaultEvery = 10 * time.Minute
	DefaultBatch = 1000
)

// Prune deletes the rows of r older than now minus r.Keep, at most batch per statement,
// until none is left or ctx ends, and returns how many it deleted.
func Prune(ctx context.Context, pool *pgxpool.Pool, r Rule, now time.Time, batch int) (int64, error) {
	if r.Keep <= 0 {
		return 0, fmt.Errorf("prune %s: the retention must be positive", r)
	}
	if batch <= 0 {
		batch = DefaultBatch
	}
	where := "true"
	if r.Where != "" {
		where = r.Where
	}
	q := fmt.Sprintf(`
		with doomed as (
			select ctid from %[1]s where %[2]s < $1 and (%[3]s) limit $2 for update skip locked
		)
		delete from %[1]s t using doomed where t.ctid = doomed.ctid`, r.Table, r.Column, where)
	before := now.Add(-r.Keep)
	var total int64
	for ctx.Err() == nil {
		tag, err := pool.Exec(ctx, q, before, batch)
		if err != nil {
			return total, fmt.Errorf("prune %s: %w", r, err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			break
		}
	}
	return total, nil
}

// Pruner prunes its rules' tables every Every.
type Pruner struct {
	Pool  *pgxpool.Pool
	Rules []Rule
	// Every is the time between two rounds. Default DefaultEvery.
	Every time.Duration
	// Batch bounds the rows one statement deletes. Default DefaultBatch.
	Batch int
	// Logger, Now: default slog.Default() and time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// Run prunes at once and then every Every until ctx ends; it returns nil then. A round
// that fails (the database is away) is logged and the next round tries again.
func (p *Pruner) Run(ctx context.Context) error {
	every, log, now := p.Every, p.Logger, p.Now
	if every <= 0 {
		every = DefaultEvery
	}
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		for _, r := range p.Rules {
			n, err := Prune(ctx, p.Pool, r, now(), p.Batch)
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				log.Warn("pruning failed; the next round tries again", "table", r.Table, "err", err)
			case n > 0:
				log.Info("pruned old rows", "table", r.Table, "rows", n, "retention", r.Keep.String())
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

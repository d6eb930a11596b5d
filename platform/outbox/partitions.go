package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Partitions is the number of relay partitions. Migration 006 computes a
// row's partition (relay_partition) as abs(hashtext(subject) % 16): a change
// here needs a migration there.
const Partitions = 16

// Advisory lock keys, in PostgreSQL's two-key form (class, id).
const (
	// lockPartition, p is held by the relay that publishes partition p.
	lockPartition int32 = 0x6f757462 // "outb"
	// lockRelay, backend pid is held by every live relay, to count them.
	lockRelay int32 = 0x6f757472 // "outr"
)

func newSession(ctx context.Context, r *Relay, conn *pgx.Conn) (*session, error) {
	s := &session{r: r, conn: conn}
	pid := int(conn.PgConn().PID())
	s.offset = pid % Partitions
	if _, err := conn.Exec(ctx, `select pg_advisory_lock($1, $2)`, lockRelay, int32(pid)); err != nil {
		return nil, fmt.Errorf("outbox relay: register: %w", err)
	}
	return s, nil
}

// countRelays counts the live relays on this database.
var countRelays = fmt.Sprintf(`
	select count(*) from pg_locks
	where locktype = 'advisory' and granted and objsubid = 2 and classid = %d
	  and database = (select oid from pg_database where datname = current_database())`, lockRelay)

// balance gives back the partitions over this relay's share and takes free
// ones up to it. It runs between rounds, so no partition is handed over with
// rows of it in flight.
func (s *session) balance(ctx context.Context) error {
	var relays int
	if err := s.conn.QueryRow(ctx, countRelays).Scan(&relays); err != nil {
		return fmt.Errorf("outbox relay: count relays: %w", err)
	}
	share := (Partitions + max(relays, 1) - 1) / max(relays, 1)
	held := s.count()
	before := held
	for p := Partitions - 1; p >= 0 && held > share; p-- {
		if !s.held[p] {
			continue
		}
		if _, err := s.conn.Exec(ctx, `select pg_advisory_unlock($1, $2)`, lockPartition, int32(p)); err != nil {
			return fmt.Errorf("outbox relay: release partition %d: %w", p, err)
		}
		s.held[p] = false
		held--
	}
	for i := 0; i < Partitions && held < share; i++ {
		p := (s.offset + i) % Partitions
		if s.held[p] {
			continue
		}
		var ok bool
		if err := s.conn.QueryRow(ctx, `select pg_try_advisory_lock($1, $2)`, lockPartition, int32(p)).Scan(&ok); err != nil {
			return fmt.Errorf("outbox relay: take partition %d: %w", p, err)
		}
		if ok {
			s.held[p] = true
			held++
		}
	}
	if held != before {
		s.r.Logger.Debug("outbox relay partitions", "held", s.partitions(), "relays", relays)
	}
	return nil
}

func (s *session) count() int {
	n := 0
	for _, h := range s.held {
		if h {
			n++
		}
	}
	return n
}

// partitions lists the partitions this session holds.
func (s *session) partitions() []int32 {
	var out []int32
	for p, h := range s.held {
		if h {
			out = append(out, int32(p))
		}
	}
	return out
}

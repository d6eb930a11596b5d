package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
)

// Relay publishes committed outbox rows, each subject's in commit order.
// Several relays (one per service replica) may run at once: they share the
// partitions (see the package comment).
type Relay struct {
	Pool   *pgxpool.Pool
	JS     jetstream.JetStream
	Logger *slog.Logger
	// Source is the CloudEvents source of the quarantine notices the relay
	// enqueues. Default "/flotilla/outbox".
	Source string
	// Sweep is how often the relay looks for rows without being notified,
	// and rebalances partitions. Default 1 second.
	Sweep time.Duration
	// Batch is how many rows one round reads. Default 100.
	Batch int
	// MaxAttempts bounds the publishes of a row that fails with an error
	// that is not permanent; then it is quarantined. Default 20.
	MaxAttempts int
	// Backoff is the wait after a row's first failed publish; it doubles
	// with each failure, up to a minute. Default 1 second.
	Backoff time.Duration
	// AckWait bounds the wait for the acks of one wave of publishes.
	// Default 5 seconds.
	AckWait time.Duration
	// Published, when set, is told the type of each event published (for
	// metrics).
	Published func(eventType string)
}

// Defaults of Relay.
const (
	DefaultMaxAttempts = 20
	maxBackoff         = time.Minute
)

// now is the clock of quarantine notices.
var now = func() time.Time { return time.Now().UTC() }

func (r Relay) withDefaults() *Relay {
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.Source == "" {
		r.Source = noticeSource
	}
	if r.Sweep <= 0 {
		r.Sweep = time.Second
	}
	if r.Batch <= 0 {
		r.Batch = 100
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.Backoff <= 0 {
		r.Backoff = time.Second
	}
	if r.AckWait <= 0 {
		r.AckWait = 5 * time.Second
	}
	return &r
}

// backoff is the wait after a row's attempts-th failure.
func (r *Relay) backoff(attempts int) time.Duration {
	d := r.Backoff
	for i := 1; i < attempts && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// Run relays until ctx ends. It returns nil when ctx is cancelled.
func (r *Relay) Run(ctx context.Context) error {
	cfg := r.withDefaults()
	log := cfg.Logger
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { cfg.listen(ctx, wake) })
	failures := 0
	for {
		err := cfg.session(ctx, wake)
		if ctx.Err() != nil {
			return nil
		}
		failures++
		if failures == 1 {
			log.Warn("outbox relay lost its database connection; reconnecting", "error", err)
		} else {
			log.Debug("outbox relay still without its database connection", "error", err, "failures", failures)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cfg.Sweep):
		}
	}
}

// session relays on one dedicated connection, which holds the relay's
// partition locks, until the connection fails or ctx ends.
func (r *Relay) session(ctx context.Context, wake <-chan struct{}) error {
	c, err := r.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := c.Hijack() // never back to the pool: it holds session locks
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	s, err := newSession(ctx, r, conn)
	if err != nil {
		return err
	}
	tick := time.NewTicker(r.Sweep)
	defer tick.Stop()
	rebalance := true
	for {
		if rebalance {
			if err := s.balance(ctx); err != nil {
				return err
			}
		}
		for {
			n, err := s.round(ctx)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
			rebalance = false
		case <-tick.C:
			rebalance = true
		}
	}
}

// listen turns notifications into wake-ups. A lost connection only costs
// latency: the sweep still finds the rows.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	for ctx.Err() == nil {
		err := func() error {
			conn, err := r.Pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "listen "+notifyChannel); err != nil {
				return err
			}
			for {
				if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
					// The connection may be mid-wait: do not return it to the pool.
					conn.Conn().Close(context.Background())
					return err
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}()
		if ctx.Err() != nil {
			return
		}
		r.Logger.Debug("outbox listen connection lost", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// session is a relay's life on one connection.
type session struct {
	r    *Relay
	conn *pgx.Conn
	// held are the partitions this session holds the locks of.
	held [Partitions]bool
	// offset is where the session starts looking for free partitions, so
	// that relays starting together do not all reach for the same ones.
	offset int
	// busDown is set while the bus is unreachable, to log the change once.
	busDown bool
}

// Package outbox makes the events a service emits commit together with the
// state change that caused them: Enqueue writes the event in the caller's
// transaction, and a Relay publishes committed rows to JetStream with the
// event id as Nats-Msg-Id, so a crash between commit and publish loses
// nothing and a re-publish is dropped by the bus.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
)

// notifyChannel is the LISTEN/NOTIFY channel that wakes the relay.
const notifyChannel = "flotilla_outbox"

// Execer is what Enqueue needs of a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Enqueue stores ev for publication on subject, in the caller's transaction.
// Enqueuing the same event id twice is a no-op.
func Enqueue(ctx context.Context, tx Execer, subject string, ev cloudevents.Event) error {
	msg, err := bus.Encode(ev, subject)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", ev.ID(), err)
	}
	headers, err := json.Marshal(msg.Header)
	if err != nil {
		return fmt.Errorf("enqueue %s: headers: %w", ev.ID(), err)
	}
	_, err = tx.Exec(ctx, `
		insert into outbox (event_id, subject, type, headers, payload)
		values ($1, $2, $3, $4, $5)
		on conflict (event_id) do nothing`,
		ev.ID(), subject, ev.Type(), headers, msg.Data)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", ev.ID(), err)
	}
	if _, err := tx.Exec(ctx, `select pg_notify($1, '')`, notifyChannel); err != nil {
		return fmt.Errorf("enqueue %s: notify: %w", ev.ID(), err)
	}
	return nil
}

// Relay publishes committed outbox rows in order. Several relays (one per
// service replica) may run at once: rows are claimed with SKIP LOCKED.
type Relay struct {
	Pool   *pgxpool.Pool
	JS     jetstream.JetStream
	Logger *slog.Logger
	// Sweep is how often the relay looks for rows without being notified.
	// Default 1 second.
	Sweep time.Duration
	// Batch is how many rows one round claims. Default 100.
	Batch int
}

// Run relays until ctx ends. It returns nil when ctx is cancelled.
func (r *Relay) Run(ctx context.Context) error {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	sweep := r.Sweep
	if sweep <= 0 {
		sweep = time.Second
	}
	wake := make(chan struct{}, 1)
	go r.listen(ctx, wake, log)
	timer := time.NewTicker(sweep)
	defer timer.Stop()
	for {
		for {
			n, err := r.RelayOnce(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				log.Warn("outbox relay failed; retrying", "error", err)
				break
			}
			if n == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-timer.C:
		}
	}
}

// listen turns notifications into wake-ups. A lost connection only costs
// latency: the sweep still finds the rows.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}, log *slog.Logger) {
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
		log.Debug("outbox listen connection lost", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// RelayOnce publishes one batch of unpublished rows and returns how many it
// published. A row that fails to publish stays for the next round with the
// error recorded; rows behind it wait, to keep order.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	batch := r.Batch
	if batch <= 0 {
		batch = 100
	}
	published := 0
	var pubErr error
	err := pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			select id, event_id, subject, headers, payload from outbox
			where published_at is null
			order by id
			limit $1
			for update skip locked`, batch)
		if err != nil {
			return err
		}
		type row struct {
			id      int64
			eventID string
			subject string
			headers []byte
			payload []byte
		}
		var claimed []row
		for rows.Next() {
			var x row
			if err := rows.Scan(&x.id, &x.eventID, &x.subject, &x.headers, &x.payload); err != nil {
				return err
			}
			claimed = append(claimed, x)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var done []int64
		for _, x := range claimed {
			msg := &nats.Msg{Subject: x.subject, Data: x.payload, Header: nats.Header{}}
			if err := json.Unmarshal(x.headers, &msg.Header); err != nil {
				pubErr = fmt.Errorf("outbox row %d: headers: %w", x.id, err)
			} else if _, err := r.JS.PublishMsg(ctx, msg, jetstream.WithMsgID(x.eventID)); err != nil {
				pubErr = fmt.Errorf("publish %s to %s: %w", x.eventID, x.subject, err)
			}
			if pubErr != nil {
				if _, err := tx.Exec(ctx, `update outbox set attempts = attempts + 1, last_error = $2 where id = $1`, x.id, pubErr.Error()); err != nil {
					return errors.Join(pubErr, err)
				}
				break
			}
			done = append(done, x.id)
		}
		if len(done) > 0 {
			if _, err := tx.Exec(ctx, `update outbox set published_at = now(), attempts = attempts + 1, last_error = null where id = any($1)`, done); err != nil {
				return err
			}
		}
		published = len(done)
		// Commit what was published and the recorded error either way.
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("relay outbox: %w", err)
	}
	return published, pubErr
}

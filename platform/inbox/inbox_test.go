package inbox_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/bustest"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/inbox"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// TestRedeliveredEventTakesEffectOnce delivers an event whose handler commits
// its effect and then fails before acknowledging, as a crash would: the
// redelivery finds the inbox row and the effect exists once.
func TestRedeliveredEventTakesEffectOnce(t *testing.T) {
	env := servicetest.New(t)
	js, pool := env.JS, env.Pool

	var deliveries atomic.Int32
	bustest.Consume(t, js, bus.StreamEvents, bus.ConsumerStatus, func(ctx context.Context, ev cloudevents.Event, m bus.Meta) error {
		deliveries.Add(1)
		_, err := inbox.Handle(ctx, pool, "status", ev, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `insert into audit_log (event_id, type, source, subject, time, payload)
				values ($1, $2, $3, $4, $5, $6)`, ev.ID(), ev.Type(), ev.Source(), ev.Subject(), ev.Time(), ev.Data())
			return err
		})
		if err != nil {
			return err
		}
		if m.NumDelivered == 1 {
			return fmt.Errorf("lost the connection before acknowledging")
		}
		return nil
	})

	ev, err := events.New(events.TypePlacementDeleted, "/flotilla/test", "web", "", events.PlacementDeleted{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := events.PlacementSubject("web")
	if _, err := bus.NewPublisher(js).Publish(t.Context(), subj, ev); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "redelivery", func() error {
		if n := deliveries.Load(); n < 2 {
			return fmt.Errorf("%d deliveries, want a redelivery", n)
		}
		return nil
	})
	var n int
	if err := pool.QueryRow(t.Context(), `select count(*) from audit_log where event_id = $1`, ev.ID()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("the event was recorded %d times over %d deliveries, want once", n, deliveries.Load())
	}
}

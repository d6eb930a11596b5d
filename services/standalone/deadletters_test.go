package standalone

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/status"
)

// deadLetterRig is the scheduler and status services on a real bus and database, with a
// small retry budget, and fleetctl pointed at them.
type deadLetterRig struct {
	*servicetest.Env
	t *testing.T
}

func newDeadLetterRig(t *testing.T) *deadLetterRig {
	env := servicetest.New(t)
	opts := env.Options()
	opts.Topology.MaxDeliver = 2
	opts.RetryBase, opts.RetryMax = 10*time.Millisecond, 50*time.Millisecond
	env.Run("status", func(ctx context.Context) error { return status.Run(ctx, status.Config{Options: opts}) })
	env.Run("scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, scheduler.Config{Options: opts}) })
	return &deadLetterRig{Env: env, t: t}
}

// fleetctl runs fleetctl against the rig's bus and returns what it printed; it fails the
// test if fleetctl fails.
func (r *deadLetterRig) fleetctl(args ...string) string {
	r.t.Helper()
	var out, errOut bytes.Buffer
	err := cli.Run(r.t.Context(), append(args, "--nats", r.NATSURL),
		cli.Options{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if err != nil {
		r.t.Fatalf("fleetctl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// deadLetters lists the dead letters with fleetctl -o json.
func (r *deadLetterRig) deadLetters() []bus.DeadLetter {
	r.t.Helper()
	var dls []bus.DeadLetter
	if err := json.Unmarshal([]byte(r.fleetctl("deadletters", "-o", "json")), &dls); err != nil {
		r.t.Fatal(err)
	}
	return dls
}

func (r *deadLetterRig) waitDeadLetter(consumer, eventID string) bus.DeadLetter {
	r.t.Helper()
	var found bus.DeadLetter
	poll.Until(r.t, time.Minute, consumer+" dead-lettering "+eventID, func() error {
		for _, dl := range r.deadLetters() {
			if dl.Consumer == consumer && dl.EventID == eventID {
				found = dl
				return nil
			}
		}
		return fmt.Errorf("no dead letter of %s by %s", eventID, consumer)
	})
	return found
}

func (r *deadLetterRig) publish(typ, id string, payload any) {
	r.t.Helper()
	// Built by hand: events.New refuses types the catalogue does not know.
	ev := cloudevents.New()
	ev.SetID(id)
	ev.SetType(typ)
	ev.SetSource("/flotilla/test")
	ev.SetTime(time.Now())
	if err := ev.SetData(cloudevents.ApplicationJSON, payload); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.Publisher.Publish(r.t.Context(), "flotilla.placement.web", ev); err != nil {
		r.t.Fatal(err)
	}
}

// count returns the number of rows query finds.
func (r *deadLetterRig) count(query string, args ...any) int {
	r.t.Helper()
	var n int
	if err := r.Pool.QueryRow(r.t.Context(), query, args...).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// settled waits until both consumers have nothing pending.
func (r *deadLetterRig) settled() {
	r.t.Helper()
	for _, name := range []string{bus.ConsumerStatus, bus.ConsumerScheduler} {
		poll.Until(r.t, time.Minute, name+" settled", func() error {
			c, err := r.JS.Consumer(r.t.Context(), bus.StreamEvents, name)
			if err != nil {
				return err
			}
			info, err := c.Info(r.t.Context())
			if err != nil {
				return err
			}
			if info.NumPending != 0 || info.NumAckPending != 0 {
				return fmt.Errorf("%d pending, %d awaiting ack", info.NumPending, info.NumAckPending)
			}
			return nil
		})
	}
}

// TestDeadLetterIsSeenFixedAndRedrivenOnce: the status service cannot record an event (its
// audit table is gone) and dead-letters it once its budget is spent; fleetctl lists it with
// the reason and shows it; once the table is back, fleetctl redrives it and the status
// service records it, once. The scheduler, which handled the event the first time, receives
// the redriven copy too and does not handle it again.
func TestDeadLetterIsSeenFixedAndRedrivenOnce(t *testing.T) {
	r := newDeadLetterRig(t)
	if _, err := r.Pool.Exec(t.Context(), `alter table audit_log rename to audit_log_away`); err != nil {
		t.Fatal(err)
	}
	r.publish(events.TypePlacementDeleted, "delete-web", events.PlacementDeleted{Name: "web"})
	dl := r.waitDeadLetter(bus.ConsumerStatus, "delete-web")
	if !strings.Contains(dl.Reason, `"audit_log" does not exist`) || dl.Deliveries != 2 || dl.Subject != "flotilla.placement.web" {
		t.Errorf("dead letter = %+v", dl)
	}
	id := strconv.FormatUint(dl.ID, 10)

	table := r.fleetctl("deadletters")
	if !strings.Contains(table, id) || !strings.Contains(table, "status") || !strings.Contains(table, "audit_log") {
		t.Errorf("fleetctl deadletters does not list it with its reason:\n%s", table)
	}
	shown := r.fleetctl("deadletters", "show", id)
	for _, want := range []string{"Event ID:", "delete-web", events.TypePlacementDeleted, `"name": "web"`} {
		if !strings.Contains(shown, want) {
			t.Errorf("fleetctl deadletters show does not show %q:\n%s", want, shown)
		}
	}
	poll.Until(t, time.Minute, "the scheduler handling the event", func() error {
		if n := r.count(`select count(*) from inbox where consumer = 'scheduler' and event_id = 'delete-web'`); n != 1 {
			return fmt.Errorf("%d inbox rows", n)
		}
		return nil
	})

	if _, err := r.Pool.Exec(t.Context(), `alter table audit_log_away rename to audit_log`); err != nil {
		t.Fatal(err)
	}
	redriven := r.fleetctl("deadletters", "redrive", id)
	if !strings.Contains(redriven, bus.OutcomeRedriven) {
		t.Errorf("fleetctl deadletters redrive:\n%s", redriven)
	}
	poll.Until(t, time.Minute, "the redriven event recorded", func() error {
		if n := r.count(`select count(*) from audit_log where event_id = 'delete-web'`); n != 1 {
			return fmt.Errorf("%d audit rows", n)
		}
		return nil
	})
	r.settled()
	if n := r.count(`select count(*) from inbox where event_id = 'delete-web'`); n != 2 {
		t.Errorf("%d inbox rows for the event, want one per consumer", n)
	}
	if dls := r.deadLetters(); len(dls) != 0 {
		t.Errorf("dead letters after the redrive: %+v", dls)
	}
}

// TestRedriveAllOfAnEventOnlyOneConsumerRejects: an event of a type the scheduler does not
// know is dead-lettered by the scheduler and recorded by the status service. Redriving it
// (fleetctl deadletters redrive --all) reaches both: the status service, which has it, does not
// record it again; the scheduler rejects it again, under a new ID.
func TestRedriveAllOfAnEventOnlyOneConsumerRejects(t *testing.T) {
	r := newDeadLetterRig(t)
	r.publish("io.flotilla.placement.future.v1", "from-the-future", map[string]string{"name": "web"})
	first := r.waitDeadLetter(bus.ConsumerScheduler, "from-the-future")
	if !strings.Contains(first.Reason, "unknown event type") {
		t.Errorf("reason %q", first.Reason)
	}
	poll.Until(t, time.Minute, "the status service recording it", func() error {
		if n := r.count(`select count(*) from audit_log where event_id = 'from-the-future'`); n != 1 {
			return fmt.Errorf("%d audit rows", n)
		}
		return nil
	})
	var auditID int64
	if err := r.Pool.QueryRow(t.Context(), `select id from audit_log where event_id = 'from-the-future'`).Scan(&auditID); err != nil {
		t.Fatal(err)
	}

	var done []bus.Redriven
	if err := json.Unmarshal([]byte(r.fleetctl("deadletters", "redrive", "--all", "-o", "json")), &done); err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].ID != first.ID || done[0].Outcome != bus.OutcomeRedriven {
		t.Fatalf("redrive --all = %+v", done)
	}
	again := r.waitDeadLetter(bus.ConsumerScheduler, "from-the-future")
	if again.ID == first.ID {
		t.Errorf("the same dead letter is still listed after its redrive")
	}
	r.settled()
	var after int64
	if err := r.Pool.QueryRow(t.Context(), `select id from audit_log where event_id = 'from-the-future'`).Scan(&after); err != nil || after != auditID {
		t.Errorf("audit row %d after the redrive (%v), want the first one, %d, alone", after, err, auditID)
	}
	for _, dl := range r.deadLetters() {
		if dl.Consumer == bus.ConsumerStatus {
			t.Errorf("the status service dead-lettered the redriven copy: %s", dl.Reason)
		}
	}
}

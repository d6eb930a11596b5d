package outbox_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/outbox"
)

// work is the n-th desired state of placement on cluster, carrying a
// ConfigMap of about size bytes.
func work(t *testing.T, cluster, placement string, n, size int) (string, cloudevents.Event) {
	t.Helper()
	cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"shop"},"data":{"blob":%q}}`,
		strings.Repeat("x", size))
	ev, err := events.New(events.TypeWorkDesired, "/flotilla/test", cluster+"/"+placement,
		events.ID("work", cluster, placement, fmt.Sprint(n)),
		events.WorkDesired{Cluster: cluster, Placement: placement, ResourceIndex: int64(n), Manifests: []json.RawMessage{json.RawMessage(cm)}})
	if err != nil {
		t.Fatal(err)
	}
	subject, err := events.WorkSubject(cluster, placement)
	if err != nil {
		t.Fatal(err)
	}
	return subject, ev
}

// resourceIndex reads the snapshot index of a WorkDesired event.
func resourceIndex(t *testing.T, ev *cloudevents.Event) int64 {
	t.Helper()
	if ev == nil {
		return 0
	}
	w, err := events.DecodeAs[events.WorkDesired](*ev)
	if err != nil {
		t.Fatal(err)
	}
	return w.ResourceIndex
}

// An event over the bus limit never enters the publish queue: Enqueue
// quarantines it with its reason, the caller's transaction commits, and the
// events behind it (on its subject and on others) are published, with a
// notice of the quarantine.
func TestEventOverTheLimitIsQuarantinedAtEnqueue(t *testing.T) {
	env := servicetest.New(t)
	setMaxBytes(t, 64<<10)
	log, logger := newLogs(t)
	got := notices(t, env)

	workSubject, small1 := work(t, "member-1", "web", 1, 100)
	_, big := work(t, "member-1", "web", 2, 100<<10)
	_, small3 := work(t, "member-1", "web", 3, 100)
	enqueue(t, env, workSubject, small1, workSubject, big, workSubject, small3, subjectOf(0), scheduled(t, placementOf(0), 1))

	q := quarantinedRow(t, env, big.ID())
	if q == nil {
		t.Fatal("the event over the limit is not in outbox_quarantine")
	}
	wantReason := fmt.Sprintf("event %s of type %s for %s is %d bytes, over the bus limit of %d bytes", big.ID(), events.TypeWorkDesired, workSubject, q.Size, 64<<10)
	if q.Reason != wantReason || q.Size <= 100<<10 || q.Attempts != 0 || q.FirstFailedAt.IsZero() {
		t.Fatalf("quarantined %+v, want reason %q, size over 100 KiB, no attempts", q, wantReason)
	}

	runRelay(t, &outbox.Relay{Pool: env.Pool, JS: env.JS, Logger: logger, Sweep: 20 * time.Millisecond})
	poll.Until(t, patience, "the events around it published, and the notice", func() error {
		if n := resourceIndex(t, lastOn(t, env, bus.StreamWork, workSubject)); n != 3 {
			return fmt.Errorf("the work subject holds index %d, want 3", n)
		}
		if lastOn(t, env, bus.StreamEvents, subjectOf(0)) == nil {
			return fmt.Errorf("the decision on another subject is not published")
		}
		if noticeOf(got.All(), big.ID()) == nil {
			return fmt.Errorf("no notice of %s among %d", big.ID(), len(got.All()))
		}
		return nil
	})
	n := noticeOf(got.All(), big.ID())
	want := events.OutboxQuarantined{EventID: big.ID(), Type: events.TypeWorkDesired, Subject: workSubject, Placement: "web", Cluster: "member-1",
		Size: q.Size, Limit: 64 << 10, Reason: wantReason, QuarantinedAt: n.QuarantinedAt}
	if *n != want || n.QuarantinedAt.IsZero() {
		t.Fatalf("notice %+v, want %+v", *n, want)
	}
	waitDrained(t, env)
	if c := log.count("outbox event quarantined"); c != 1 {
		t.Errorf("the quarantine was logged %d times, want once", c)
	}
}

// An event the server refuses for its size (here: enqueued under a larger
// limit than the server's max_payload) is quarantined at its first publish,
// and the relay goes on: the rows behind it on its subject and on others are
// published, and the log does not repeat the failure.
func TestEventTooBigForTheServerIsQuarantinedAtPublish(t *testing.T) {
	env := servicetest.New(t)
	setMaxBytes(t, 8<<20)
	log, logger := newLogs(t)
	got := notices(t, env)

	workSubject, small1 := work(t, "member-1", "web", 1, 100)
	_, big := work(t, "member-1", "web", 2, 2<<20)
	_, small3 := work(t, "member-1", "web", 3, 100)
	enqueue(t, env, workSubject, small1, workSubject, big, workSubject, small3, subjectOf(0), scheduled(t, placementOf(0), 1))
	if q := quarantinedRow(t, env, big.ID()); q != nil {
		t.Fatalf("quarantined at enqueue under an 8 MiB limit: %+v", q)
	}

	runRelay(t, &outbox.Relay{Pool: env.Pool, JS: env.JS, Logger: logger, Sweep: 20 * time.Millisecond})
	poll.Until(t, patience, "the events around it published, and the notice", func() error {
		if n := resourceIndex(t, lastOn(t, env, bus.StreamWork, workSubject)); n != 3 {
			return fmt.Errorf("the work subject holds index %d, want 3", n)
		}
		if lastOn(t, env, bus.StreamEvents, subjectOf(0)) == nil {
			return fmt.Errorf("the decision on another subject is not published")
		}
		if noticeOf(got.All(), big.ID()) == nil {
			return fmt.Errorf("no notice of %s among %d", big.ID(), len(got.All()))
		}
		return nil
	})
	q := quarantinedRow(t, env, big.ID())
	if q == nil {
		t.Fatal("the event the server refused is not in outbox_quarantine")
	}
	limit := env.NC.MaxPayload()
	wantReason := fmt.Sprintf("event %s of type %s for %s is %d bytes, over the bus limit of %d bytes", big.ID(), events.TypeWorkDesired, workSubject, q.Size, limit)
	if q.Reason != wantReason || q.Size <= 2<<20 || q.Attempts != 1 {
		t.Fatalf("quarantined %+v, want reason %q, size over 2 MiB, one attempt", q, wantReason)
	}
	if n := noticeOf(got.All(), big.ID()); n.Size != q.Size || n.Limit != limit || n.Attempts != 1 || n.Reason != wantReason {
		t.Fatalf("notice %+v does not match the quarantine %+v", *n, q)
	}

	// Later events still flow, sweep after sweep, and nothing repeats the failure.
	_, small4 := work(t, "member-1", "web", 4, 100)
	enqueue(t, env, workSubject, small4)
	poll.Until(t, patience, "a later event published", func() error {
		if n := resourceIndex(t, lastOn(t, env, bus.StreamWork, workSubject)); n != 4 {
			return fmt.Errorf("the work subject holds index %d, want 4", n)
		}
		return nil
	})
	waitDrained(t, env)
	if c := log.count("maximum payload exceeded"); c > 1 {
		t.Errorf("the log shows 'maximum payload exceeded' %d times", c)
	}
	if c := log.count("outbox event quarantined"); c != 1 {
		t.Errorf("the quarantine was logged %d times, want once", c)
	}
}

// A row that keeps failing with an error that may pass (here: a subject no
// stream takes, so no responders while the bus is up) is retried with
// backoff, its subject's later rows waiting behind it, while other subjects
// flow; after MaxAttempts it is quarantined and its subject moves on.
func TestFailingEventIsRetriedThenQuarantined(t *testing.T) {
	env := servicetest.New(t)
	_, logger := newLogs(t)
	got := notices(t, env)

	const nowhere = "flotilla.nowhere.web"
	bad1, bad2 := scheduled(t, "nowhere", 1), scheduled(t, "nowhere", 2)
	good := scheduled(t, placementOf(0), 1)
	enqueue(t, env, nowhere, bad1, nowhere, bad2, subjectOf(0), good)

	runRelay(t, &outbox.Relay{Pool: env.Pool, JS: env.JS, Logger: logger, Sweep: 20 * time.Millisecond,
		MaxAttempts: 3, Backoff: 50 * time.Millisecond, AckWait: 2 * time.Second})
	poll.Until(t, patience, "both failing events quarantined", func() error {
		for _, ev := range []cloudevents.Event{bad1, bad2} {
			if quarantinedRow(t, env, ev.ID()) == nil {
				return fmt.Errorf("%s not quarantined yet", ev.ID())
			}
		}
		return nil
	})
	q1, q2 := quarantinedRow(t, env, bad1.ID()), quarantinedRow(t, env, bad2.ID())
	if q1.Attempts != 3 || !strings.Contains(q1.Reason, "failed to publish 3 times; the last error: ") || !strings.HasPrefix(q1.Reason, "event "+bad1.ID()) {
		t.Errorf("first failing event quarantined as %+v", q1)
	}
	if !q1.LastFailedAt.After(q1.FirstFailedAt) {
		t.Errorf("first failing event failed from %v to %v: not retried", q1.FirstFailedAt, q1.LastFailedAt)
	}
	if q2.FirstFailedAt.Before(q1.QuarantinedAt) {
		t.Errorf("the second event on the subject was tried at %v, before the first was quarantined at %v", q2.FirstFailedAt, q1.QuarantinedAt)
	}
	var goodAt time.Time
	if err := env.Pool.QueryRow(t.Context(), `select published_at from outbox where event_id = $1`, good.ID()).Scan(&goodAt); err != nil {
		t.Fatalf("the event on another subject: %v", err)
	}
	if !goodAt.Before(q1.QuarantinedAt) {
		t.Errorf("the event on another subject was published at %v, not before the failing one was quarantined at %v", goodAt, q1.QuarantinedAt)
	}
	poll.Until(t, patience, "notices of both", func() error {
		for _, ev := range []cloudevents.Event{bad1, bad2} {
			if noticeOf(got.All(), ev.ID()) == nil {
				return fmt.Errorf("no notice of %s", ev.ID())
			}
		}
		return nil
	})
	if n := noticeOf(got.All(), bad1.ID()); n.Attempts != 3 || n.Placement != "" || n.Subject != nowhere {
		t.Errorf("notice %+v", *n)
	}
}

// The size Enqueue checks is the size NATS checks: an event of exactly the
// server's max_payload is published, one byte more is quarantined.
func TestEnqueueMeasuresWhatNATSMeasures(t *testing.T) {
	env := servicetest.New(t)
	limit := env.NC.MaxPayload()
	setMaxBytes(t, limit)
	_, logger := newLogs(t)
	// A fixed time, so that the ce-time header is as long in each event.
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	sized := func(n, size int64) (string, cloudevents.Event) {
		// The blob is a JSON string of x's: one more x, one more byte.
		subject, probe := work(t, "member-1", "web", int(n), 1000)
		probe.SetTime(at)
		msg, err := bus.Encode(probe, subject)
		if err != nil {
			t.Fatal(err)
		}
		subject, ev := work(t, "member-1", "web", int(n), int(1000+size-outbox.WireSize(msg, probe.ID())))
		ev.SetTime(at)
		return subject, ev
	}
	subject, atLimit := sized(1, limit)
	_, overLimit := sized(2, limit+1)
	enqueue(t, env, subject, atLimit, subject, overLimit)
	if q := quarantinedRow(t, env, atLimit.ID()); q != nil {
		t.Fatalf("an event of exactly %d bytes was quarantined: %+v", limit, q)
	}
	if q := quarantinedRow(t, env, overLimit.ID()); q == nil || q.Size != limit+1 {
		t.Fatalf("an event of %d bytes: quarantined %+v, want quarantined at that size", limit+1, q)
	}
	runRelay(t, &outbox.Relay{Pool: env.Pool, JS: env.JS, Logger: logger, Sweep: 20 * time.Millisecond})
	poll.Until(t, patience, "the event at the limit published", func() error {
		if n := resourceIndex(t, lastOn(t, env, bus.StreamWork, subject)); n != 1 {
			return fmt.Errorf("the work subject holds index %d, want 1", n)
		}
		return nil
	})
}

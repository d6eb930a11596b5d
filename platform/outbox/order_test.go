package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/outbox"
)

// TestRelaysKeepEachSubjectInCommitOrder races several relays on one outbox
// while writers commit many events on many subjects: every subject's events
// reach the stream once each, in commit order. Relays that start together on
// a backlog race hardest, so the test does that several times.
func TestRelaysKeepEachSubjectInCommitOrder(t *testing.T) {
	env := servicetest.New(t)
	const subjects, perSubject, relays, rounds = 8, 60, 3, 4
	got := collectSequences(t, env)

	enqueue := func(s, n int) {
		err := pgx.BeginFunc(t.Context(), env.Pool, func(tx pgx.Tx) error {
			return outbox.Enqueue(t.Context(), tx, subjectOf(s), scheduled(t, placementOf(s), n))
		})
		if err != nil {
			t.Errorf("enqueue %d on %s: %v", n, subjectOf(s), err)
		}
	}
	const perRound = perSubject / rounds
	for round := range rounds {
		first := round*perRound + 1
		// A backlog first, subject after subject, so that the relays start
		// on long runs of one subject...
		for s := range subjects {
			for n := first; n < first+perRound/2; n++ {
				enqueue(s, n)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range relays {
			wg.Go(func() {
				relay := &outbox.Relay{Pool: env.Pool, JS: env.JS, Logger: env.Logger(), Sweep: 20 * time.Millisecond, Batch: 5}
				if err := relay.Run(ctx); err != nil {
					t.Errorf("relay: %v", err)
				}
			})
		}
		// ...then more while they run, one writer per subject as a service
		// holds a placement's row lock: commit order within a subject is
		// the writer's order.
		var writers sync.WaitGroup
		for s := range subjects {
			writers.Go(func() {
				for n := first + perRound/2; n < first+perRound; n++ {
					enqueue(s, n)
				}
			})
		}
		writers.Wait()
		waitDrained(t, env)
		cancel()
		wg.Wait()
	}

	poll.Until(t, patience, "every event on the stream", func() error {
		if n := got.total(); n != subjects*perSubject {
			return fmt.Errorf("%d of %d events read back", n, subjects*perSubject)
		}
		return nil
	})
	got.check(t, subjects, perSubject)
	if n := streamMsgs(t, env, bus.StreamEvents); n != subjects*perSubject {
		t.Fatalf("the stream holds %d messages, want %d (an event was doubled or lost)", n, subjects*perSubject)
	}
}

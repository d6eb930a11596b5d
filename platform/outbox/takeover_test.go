package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/outbox"
)

// dyingJS is a relay's bus that kills the relay at its after-th publish,
// between sending one message of a batch and the next.
type dyingJS struct {
	jetstream.JetStream
	after int32
	calls atomic.Int32
	kill  func()
}

func (d *dyingJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if d.calls.Add(1) == d.after {
		d.kill()
	}
	return d.JetStream.PublishMsgAsync(m, opts...)
}

// holders maps each backend holding relay partitions to how many it holds.
func holders(t *testing.T, env *servicetest.Env) map[int32]int {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), fmt.Sprintf(`
		select pid, count(*)::int from pg_locks
		where locktype = 'advisory' and granted and objsubid = 2 and classid = %d
		  and database = (select oid from pg_database where datname = current_database())
		group by pid`, outbox.LockPartition))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int{}
	var pid int32
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&pid, &n}, func() error { out[pid] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// A relay that dies in the middle of a batch (its connection terminated and
// its context cancelled) has its partitions taken over by the relay that
// survives, which publishes the rest: every subject's events arrive once
// each, in commit order.
func TestDeadRelaysPartitionsAreTakenOver(t *testing.T) {
	env := servicetest.New(t)
	const subjects, perSubject = 16, 30
	got := collectSequences(t, env)

	// Relay a starts alone and takes every partition.
	var aPID atomic.Int32
	ctxA, cancelA := context.WithCancel(t.Context())
	jsA := &dyingJS{JetStream: env.JS, after: 40, kill: func() {
		if _, err := env.Pool.Exec(context.Background(), `select pg_terminate_backend($1)`, aPID.Load()); err != nil {
			t.Errorf("terminate relay a: %v", err)
		}
		cancelA()
	}}
	var wg sync.WaitGroup
	wg.Go(func() {
		relay := &outbox.Relay{Pool: env.Pool, JS: jsA, Logger: env.Logger(), Sweep: 20 * time.Millisecond, Batch: 10}
		if err := relay.Run(ctxA); err != nil {
			t.Errorf("relay a: %v", err)
		}
	})
	t.Cleanup(func() { cancelA(); wg.Wait() })
	poll.Until(t, patience, "relay a holds every partition", func() error {
		h := holders(t, env)
		for pid, n := range h {
			if n == outbox.Partitions {
				aPID.Store(pid)
				return nil
			}
		}
		return fmt.Errorf("partitions held: %v", h)
	})

	var evs []any
	for n := 1; n <= perSubject; n++ {
		for s := range subjects {
			evs = append(evs, subjectOf(s), scheduled(t, placementOf(s), n))
		}
	}
	enqueue(t, env, evs...)
	// Relay b joins; a dies at its 40th publish, mid-batch.
	runRelay(t, &outbox.Relay{Pool: env.Pool, JS: env.JS, Logger: env.Logger(), Sweep: 20 * time.Millisecond, Batch: 10})

	poll.Until(t, patience, "relay a dead and relay b holding every partition", func() error {
		if jsA.calls.Load() < jsA.after {
			return fmt.Errorf("relay a published %d messages, dies at %d", jsA.calls.Load(), jsA.after)
		}
		h := holders(t, env)
		if _, ok := h[aPID.Load()]; ok || len(h) != 1 {
			return fmt.Errorf("partitions held: %v (relay a was %d)", h, aPID.Load())
		}
		for _, n := range h {
			if n != outbox.Partitions {
				return fmt.Errorf("partitions held: %v", h)
			}
		}
		return nil
	})
	waitDrained(t, env)
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

package submit

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
)

func msgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestConcurrentIdenticalPublishesStoreOnce: two fleetctl runs applying the
// same file at once see the same last event, derive the same id, and the
// stream keeps one copy.
func TestConcurrentIdenticalPublishesStoreOnce(t *testing.T) {
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := change.PlacementDeleted("web")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	outcomes := make([]Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p, err := New(t.Context(), js)
			if err != nil {
				t.Error(err)
				return
			}
			if outcomes[i], err = p.Publish(t.Context(), c); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	published := 0
	for _, o := range outcomes {
		if o == Published {
			published++
		}
	}
	if published != 1 {
		t.Errorf("%d publishers report Published, want 1", published)
	}
	if got := msgs(t, js); got != 1 {
		t.Errorf("stream holds %d events, want 1", got)
	}
}

// TestRepublishAfterAChange: A, B, then A again stores three events; A twice
// in a row stores one.
func TestRepublishAfterAChange(t *testing.T) {
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	keep, err := change.MemberLeft("m1", events.LeaveKeep)
	if err != nil {
		t.Fatal(err)
	}
	del, err := change.MemberLeft("m1", events.LeaveDelete)
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		c    change.Change
		want Outcome
	}{{keep, Published}, {keep, Unchanged}, {del, Published}, {keep, Published}, {keep, Unchanged}} {
		got, err := p.Publish(t.Context(), step.c)
		if err != nil {
			t.Fatal(err)
		}
		if got != step.want {
			t.Errorf("step %d: outcome %d, want %d", i, got, step.want)
		}
	}
	if got := msgs(t, js); got != 3 {
		t.Errorf("stream holds %d events, want 3", got)
	}
}

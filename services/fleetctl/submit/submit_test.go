package submit

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
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

// TestPublishAllKeepsOrderAndOutcomes: 20 changes, one subject twice (A, B, A)
// and one unchanged from before, are stored in the order given with the
// outcomes Publish would give one at a time; applying them again stores
// nothing.
func TestPublishAllKeepsOrderAndOutcomes(t *testing.T) {
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	mustChange := func(c change.Change, err error) change.Change {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := mustChange(change.PlacementDeleted("p-00"))
	if _, err := p.Publish(t.Context(), before); err != nil {
		t.Fatal(err)
	}
	cs := []change.Change{before}
	for i := 1; i < 17; i++ {
		cs = append(cs, mustChange(change.PlacementDeleted(fmt.Sprintf("p-%02d", i))))
	}
	keep := mustChange(change.MemberLeft("m1", events.LeaveKeep))
	cs = append(cs, keep, mustChange(change.MemberLeft("m1", events.LeaveDelete)), keep)

	got, err := p.PublishAll(t.Context(), cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range got {
		if want := Published; (i == 0 && o != Unchanged) || (i > 0 && o != want) {
			t.Errorf("change %d: outcome %d", i, o)
		}
	}
	if n := msgs(t, js); n != 20 {
		t.Errorf("stream holds %d events, want 20 (1 before, 19 now)", n)
	}
	// The stream holds them in the order given.
	stream, _ := js.Stream(t.Context(), bus.StreamEvents)
	for seq := uint64(2); seq <= 20; seq++ {
		m, err := stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if want := cs[seq-1].Subject; m.Subject != want {
			t.Errorf("message %d is on %s, want %s", seq, m.Subject, want)
		}
		// Only the call's last event ends the burst, though the subject
		// repeated at the end split the publishing in three.
		ev, err := bus.Decode(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
		if err != nil {
			t.Fatal(err)
		}
		if last := events.IsLast(ev); last != (seq == 20) {
			t.Errorf("message %d marked as the burst's last: %v", seq, last)
		}
	}
	again, err := p.PublishAll(t.Context(), cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range again {
		if o != Unchanged && i != len(cs)-1 && i != len(cs)-2 {
			t.Errorf("applying again: change %d outcome %d, want unchanged", i, o)
		}
	}
}

// TestHubOwnedObjectsAreRefused: what hubsync published from a hub cluster is the hub's to
// change; fleetctl's change is refused with nothing stored, until the hub deletes the object.
func TestHubOwnedObjectsAreRefused(t *testing.T) {
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := New(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	hub.AsHub()
	fleetctl, err := New(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	joined, left := memberChange(t, "member-1", true), memberChange(t, "member-1", false)
	if _, err := hub.Publish(t.Context(), joined); err != nil {
		t.Fatal(err)
	}
	if _, err := fleetctl.Publish(t.Context(), left); !errors.Is(err, ErrHubOwned) {
		t.Errorf("fleetctl's change of a hub-owned member: %v, want ErrHubOwned", err)
	}
	if o, err := fleetctl.Publish(t.Context(), joined); err != nil || o != Unchanged {
		t.Errorf("fleetctl applying what the hub already says: %v %v, want unchanged", o, err)
	}
	if got := msgs(t, js); got != 1 {
		t.Errorf("stream holds %d events, want the hub's 1", got)
	}
	if _, err := hub.Publish(t.Context(), left); err != nil {
		t.Fatal(err)
	}
	if o, err := fleetctl.Publish(t.Context(), joined); err != nil || o != Published {
		t.Errorf("fleetctl joining a member the hub let go: %v %v, want published", o, err)
	}
}

func memberChange(t *testing.T, name string, join bool) change.Change {
	t.Helper()
	if !join {
		c, err := change.MemberLeft(name, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	subject, err := events.MemberSubject(name)
	if err != nil {
		t.Fatal(err)
	}
	m := api.MemberCluster{}
	m.Name = name
	return change.Change{Type: events.TypeMemberJoined, Subject: subject, EventSubject: name, Payload: events.MemberJoined{Member: m}}
}

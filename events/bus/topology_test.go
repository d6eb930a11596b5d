package bus_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events/bus"
)

// TestWorkStreamTakesMoreThanAThousandMembers: NATS allows a stream 1,000 consumers unless
// it says otherwise; the work stream takes the 1,001st member's worker.
func TestWorkStreamTakesMoreThanAThousandMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 1,001 consumers")
	}
	_, js := startBus(t, bus.TopologyOptions{})
	for i := range 1001 {
		if _, err := bus.EnsureApplyConsumer(t.Context(), js, fmt.Sprintf("member-%d", i), bus.TopologyOptions{}); err != nil {
			t.Fatalf("the worker of member %d gets no consumer: %v", i+1, err)
		}
	}
}

// TestEnsureTopologyLeavesUnchangedStreamsAlone: every hub service ensures the topology as
// it starts; streams whose configuration did not change are not updated (nats-server
// rewrites a stream's store on any update, racing consumers being created beside it),
// and a changed option still updates the streams it touches.
func TestEnsureTopologyLeavesUnchangedStreamsAlone(t *testing.T) {
	opts := bus.TopologyOptions{}
	nc, js := startBus(t, opts)
	updated := make(chan string, 64)
	sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.UPDATED.>", func(m *nats.Msg) {
		updated <- strings.TrimPrefix(m.Subject, "$JS.EVENT.ADVISORY.STREAM.UPDATED.")
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	if err := bus.EnsureTopology(t.Context(), js, opts); err != nil {
		t.Fatal(err)
	}
	// Then a change that touches the streams kept as long as events, whose advisories
	// come after any the unchanged run caused.
	opts.EventsMaxAge = 48 * time.Hour
	if err := bus.EnsureTopology(t.Context(), js, opts); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{bus.StreamEvents: true, bus.StreamHubBlobs: true}
	got := map[string]bool{}
	timeout := time.After(patience)
	for len(got) < len(want) || !maps.Equal(got, want) {
		select {
		case name := <-updated:
			if !want[name] {
				t.Fatalf("stream %s was updated though its configuration did not change", name)
			}
			got[name] = true
		case <-timeout:
			t.Fatalf("updated streams %v, want %v", got, want)
		}
	}
	s, err := js.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if age := s.CachedInfo().Config.MaxAge; age != 48*time.Hour {
		t.Errorf("events stream MaxAge %s after the change, want 48h", age)
	}
}

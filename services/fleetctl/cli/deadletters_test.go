package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
)

// deadLetterBus starts NATS with the topology and n dead letters of the rollout, and
// returns the --nats flag.
func deadLetterBus(t *testing.T, n int) []string {
	t.Helper()
	srv, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(withTimeout(t), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		msg := nats.NewMsg(bus.DeadLetterSubject("rollout"))
		msg.Header.Set("ce-id", fmt.Sprint("ev-", i))
		msg.Header.Set(bus.HeaderDeadLetterConsumer, "rollout")
		msg.Header.Set(bus.HeaderDeadLetterReason, fmt.Sprintf("reason %d", i))
		if _, err := js.PublishMsg(withTimeout(t), msg); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--nats", srv.URL()}
}

func TestDeadLettersSaysWhenThereAreNone(t *testing.T) {
	nats := deadLetterBus(t, 0)
	r := fleetctl(t, "", append([]string{"deadletters"}, nats...)...)
	if r.e != nil || r.out != "" || r.err != "No dead letters found\n" {
		t.Errorf("out %q, err %q, %v", r.out, r.err, r.e)
	}
	r = fleetctl(t, "", append([]string{"deadletters", "-o", "json"}, nats...)...)
	if r.e != nil || strings.TrimSpace(r.out) != "[]" {
		t.Errorf("-o json: out %q, %v", r.out, r.e)
	}
	r = fleetctl(t, "", append([]string{"deadletters", "show", "3"}, nats...)...)
	if r.e == nil || r.e.Error() != "deadletter 3 not found" {
		t.Errorf("show of an unknown id: %v", r.e)
	}
}

// TestDeadLettersListsAPageAndSaysWhereTheNextStarts: past --limit, fleetctl says how many
// more there are and how to see them.
func TestDeadLettersListsAPageAndSaysWhereTheNextStarts(t *testing.T) {
	nats := deadLetterBus(t, 5)
	r := fleetctl(t, "", append([]string{"deadletters", "--limit", "2", "-o", "name"}, nats...)...)
	if r.e != nil || r.out != "deadletter/1\ndeadletter/2\n" {
		t.Fatalf("first page: out %q, %v", r.out, r.e)
	}
	if want := "Warning: 3 more dead letters; list them with --after 2, or all with --limit 0\n"; r.err != want {
		t.Errorf("stderr %q, want %q", r.err, want)
	}
	r = fleetctl(t, "", append([]string{"deadletters", "--after", "2", "--limit", "0", "-o", "name"}, nats...)...)
	if r.e != nil || r.out != "deadletter/3\ndeadletter/4\ndeadletter/5\n" || r.err != "" {
		t.Errorf("the rest: out %q, err %q, %v", r.out, r.err, r.e)
	}
}

// TestRedriveReportsWhatItCouldNotDo: a dead letter without its message cannot be redriven;
// the others named still are, and the command fails saying which.
func TestRedriveReportsWhatItCouldNotDo(t *testing.T) {
	nats := deadLetterBus(t, 1) // holds no copy of a message
	r := fleetctl(t, "", append([]string{"deadletters", "redrive", "1", "4"}, nats...)...)
	if r.e == nil || !strings.Contains(r.e.Error(), "dead letter 1: dead letter holds no copy of its message") ||
		!strings.Contains(r.e.Error(), "deadletter 4 not found") {
		t.Errorf("redrive: %v", r.e)
	}
}

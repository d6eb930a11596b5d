package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// A member down is silent, or says in its heartbeats that its API server is unreachable;
// neither applies nor reports the work it is sent until it recovers, and then both do it
// and beat healthy again.
func TestDownMembersHoldTheirWorkUntilTheyRecover(t *testing.T) {
	b := newTestBus(t)
	f := b.run(t, Options{Members: 2, HeartbeatPeriod: time.Second})
	if err := f.Down([]string{"sim-1"}, Silent); err != nil {
		t.Fatal(err)
	}
	if err := f.Down([]string{"sim-2"}, Unreachable); err != nil {
		t.Fatal(err)
	}
	if err := f.Down([]string{"sim-1"}, Up); err == nil {
		t.Error("Down(Up) = nil, want an error")
	}
	sick := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.sick["sim-2"])
	}
	poll.Until(t, 30*time.Second, "sim-2 to say its API server is unreachable", func() error {
		if sick() == 0 {
			return errors.New("no unhealthy heartbeat yet")
		}
		return nil
	})
	b.mu.Lock()
	silentBeats, message := b.beats["sim-1"], b.sick["sim-2"][0]
	b.mu.Unlock()
	if !strings.HasPrefix(message, "the member's API server cannot be read: ") {
		t.Errorf("sim-2's heartbeat message %q", message)
	}
	for _, name := range f.Names() {
		b.publishWork(t, events.TypeWorkDesired, events.WorkDesired{Cluster: name, Placement: "app", ResourceIndex: 1, Generation: 1,
			ResourceHash: "h", Manifests: manifests(t, namespaceJSON, configMapJSON)}, name, "app")
	}
	// Two more heartbeats of sim-2: the members had their work for a period at least.
	seen := sick()
	poll.Until(t, 30*time.Second, "two more heartbeats of sim-2", func() error {
		if n := sick(); n < seen+2 {
			return fmt.Errorf("%d unhealthy heartbeats", n)
		}
		return nil
	})
	b.mu.Lock()
	reports, beats := len(b.reports["sim-1/app"])+len(b.reports["sim-2/app"]), b.beats["sim-1"]
	b.mu.Unlock()
	if reports != 0 || beats != silentBeats || f.Holds("sim-1", "app") || f.Holds("sim-2", "app") {
		t.Fatalf("down members reported %d times, the silent one beat %d times (%d before), hold %v %v",
			reports, beats, silentBeats, f.Holds("sim-1", "app"), f.Holds("sim-2", "app"))
	}

	if err := f.Recover(f.Names()); err != nil {
		t.Fatal(err)
	}
	for _, name := range f.Names() {
		b.waitReport(t, name+"/app", "applied after the recovery", func(r events.WorkReported) error {
			if r.Applied.Status != "True" {
				return fmt.Errorf("applied %+v", r.Applied)
			}
			return nil
		})
		poll.Until(t, 30*time.Second, name+" to hold the placement", func() error {
			if !f.Holds(name, "app") {
				return errors.New("it does not")
			}
			return nil
		})
	}
	sickAfter := sick()
	poll.Until(t, 30*time.Second, "both members to beat again, healthy", func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.beats["sim-1"] <= silentBeats || b.beats["sim-2"] < seen+4 {
			return fmt.Errorf("beats %v", b.beats)
		}
		return nil
	})
	if n := sick(); n > sickAfter+1 {
		t.Errorf("sim-2 sent %d unhealthy heartbeats after it recovered", n-sickAfter)
	}
}

package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// The scheduler keeps decisions decoded between batches (bindingCache). A decision
// another replica wrote since, or that one transaction wrote twice, is read again:
// every re-decision starts from the decision in force.
func TestCachedDecisionsFollowEveryWrite(t *testing.T) {
	d := newDelivering(t)
	for i, m := range []string{"member-1", "member-2", "member-3"} {
		d.mustDeliver(uint64(1+i), events.TypeMemberJoined, joining(m))
	}
	fixed := func(names ...string) *api.PlacementPolicy {
		return &api.PlacementPolicy{PlacementType: api.PickFixedPlacementType, ClusterNames: names}
	}
	d.mustDeliver(4, events.TypePlacementUpserted, placement("web", fixed("member-1")))
	if got := d.chosen("web"); !slices.Equal(got, []string{"member-1"}) {
		t.Fatalf("chosen %v, want [member-1]", got)
	}
	if _, cached := d.s.bindings.get("web"); cached == nil {
		t.Fatal("the decision read is not kept decoded")
	}

	// Another replica (its own cache, the same database) changes the placement.
	other := newScheduler(d.s.env, func() time.Time { return d.now }, 0)
	if err := other.load(t.Context()); err != nil {
		t.Fatal(err)
	}
	o := &delivering{t: t, env: d.env, s: other, now: d.now, n: 100}
	o.mustDeliver(5, events.TypePlacementUpserted, placement("web", fixed("member-2")))
	if got := d.chosen("web"); !slices.Equal(got, []string{"member-2"}) {
		t.Fatalf("after another replica's decision: chosen %v, want [member-2]", got)
	}

	// Two decisions of one placement in one batch: one transaction, so one xmin.
	var batch []bus.Delivery
	for i, names := range [][]string{{"member-3"}, {"member-1"}} {
		ev, err := events.New(events.TypePlacementUpserted, "/flotilla/test", "", events.ID("cache-test", names[0]), placement("web", fixed(names...)))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, bus.Delivery{Event: ev, Meta: bus.Meta{Sequence: uint64(6 + i), Time: d.now, Stream: bus.StreamEvents}})
	}
	if err := d.s.handle(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	if got := d.chosen("web"); !slices.Equal(got, []string{"member-1"}) {
		t.Fatalf("after a batch that decided twice: chosen %v, want [member-1]", got)
	}
	if got := o.chosen("web"); !slices.Equal(got, []string{"member-1"}) {
		t.Fatalf("the other replica reads %v, want [member-1]", got)
	}
}

func TestBindingCacheStaysWithinItsBudget(t *testing.T) {
	c := newBindingCache(100)
	c.put("a", "1", &schedule.Decision{}, 60)
	c.put("b", "1", &schedule.Decision{}, 60) // would exceed: not admitted
	if _, d := c.get("b"); d != nil || c.used != 60 {
		t.Fatalf("used %d after a put past the budget", c.used)
	}
	c.put("a", "2", &schedule.Decision{}, 90) // a newer version of an entry it holds replaces it
	if xmin, d := c.get("a"); xmin != "2" || d == nil || c.used != 90 {
		t.Fatalf("a at %q, used %d after replacing it", xmin, c.used)
	}
	c.forget("a")
	if c.used != 0 || len(c.entries) != 0 {
		t.Fatalf("used %d, %d entries after forgetting all", c.used, len(c.entries))
	}
}

package status

import (
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
)

func cached(clusters int) *stored {
	st := &stored{}
	st.status.PlacementStatuses = make([]api.ResourcePlacementStatus, clusters)
	return st
}

// A placement is served from the cache only at the version it was kept at, and only
// once: the batch that takes it owns it until it puts it back.
func TestFoldCacheServesOnlyTheVersionKept(t *testing.T) {
	c := newFoldCache(1<<20, time.Now)
	st := cached(10)
	c.put("web", "100/7", st)
	if got := c.take("web", "101/7"); got != nil {
		t.Error("a placement another writer changed (new xmin) was served from the cache")
	}
	if got := c.take("web", "100/7"); got != nil {
		t.Error("the entry of an older version was kept after a miss")
	}
	c.put("web", "102/8", st)
	if got := c.take("web", "102/8"); got != st {
		t.Error("the version kept was not served")
	}
	if got := c.take("web", "102/8"); got != nil {
		t.Error("a placement taken by one batch was served to another")
	}
	if c.used != 0 {
		t.Errorf("%d bytes accounted with nothing cached", c.used)
	}
}

// When full, the cache keeps what it holds and admits nothing new; a placement taken
// and put back keeps its place.
func TestFoldCacheAdmitsNothingWhenFull(t *testing.T) {
	one := sizeOf(cached(100))
	c := newFoldCache(2*one, time.Now)
	c.put("a", "1/1", cached(100))
	c.put("b", "1/1", cached(100))
	c.put("c", "1/1", cached(100))
	if c.take("c", "1/1") != nil {
		t.Error("a third placement was admitted over the budget of two")
	}
	st := c.take("a", "1/1")
	if st == nil {
		t.Fatal("a placement admitted first is gone")
	}
	c.put("a", "2/2", st)
	if c.take("a", "2/2") == nil || c.take("b", "1/1") == nil {
		t.Error("placements put back within the budget were not kept")
	}
}

// Reports are read per batch and never cached, and entries unused for idleAfter go.
func TestFoldCacheDropsReportsAndIdleEntries(t *testing.T) {
	now := time.Unix(0, 0)
	c := newFoldCache(1<<20, func() time.Time { return now })
	st := cached(1)
	st.in.ReportSeqs = map[string]int64{"m": 1}
	c.put("old", "1/1", st)
	if st.in.ReportSeqs != nil {
		t.Error("a batch's reports were kept in the cache")
	}
	now = now.Add(idleAfter + time.Minute)
	c.put("new", "1/1", cached(1))
	if c.take("old", "1/1") != nil {
		t.Errorf("an entry unused for %s was kept", idleAfter+time.Minute)
	}
	if c.take("new", "1/1") == nil {
		t.Error("the fresh entry was dropped")
	}
}

func TestFoldCacheOff(t *testing.T) {
	c := newFoldCache(-1, time.Now)
	c.put("web", "1/1", cached(1))
	if c.take("web", "1/1") != nil {
		t.Error("a cache turned off served a placement")
	}
}

package status

import (
	"sync"
	"time"
)

// foldCache keeps, between batches, the decoded fold inputs and status of the
// placements the service folded last, so that a batch does not decode a
// placement's whole decision, rollout progress and status (one entry per
// cluster) again for each report it holds. In a burst of reports spread over
// hundreds of placements, a batch holds a report or two per placement, and that
// decoding was a quarter of the service's CPU.
//
// An entry is valid for one version of the placement's rows: PostgreSQL's xmin of
// its status_placements and placement_status rows, which any update, by this
// replica or another, changes. A batch takes its placements out of the cache
// (they are its own until it ends) and puts them back with their new version once
// it has committed; a batch that fails puts nothing back.
//
// The cache is bounded by an estimate of the memory its entries hold. When full it
// admits no new placement rather than evicting one: a burst cycles through its
// placements in the same order, and evicting the least recently used would evict
// every entry before its next use. Entries unused for idleAfter are dropped.
type foldCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	entries map[string]cacheEntry
	now     func() time.Time
	swept   time.Time
}

type cacheEntry struct {
	version string
	st      *stored
	size    int64
	used    time.Time
}

// idleAfter is how long an entry stays unused before it is dropped.
const idleAfter = 10 * time.Minute

// DefaultFoldCacheBytes bounds the fold cache by default: about 500 placements of
// 100 clusters each.
const DefaultFoldCacheBytes = 128 << 20

func newFoldCache(budget int64, now func() time.Time) *foldCache {
	if budget <= 0 {
		return nil
	}
	return &foldCache{budget: budget, entries: map[string]cacheEntry{}, now: now}
}

// take removes the placement's entry and returns its inputs and status if they are
// of that version; nil otherwise.
func (c *foldCache) take(name, version string) *stored {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[name]
	if !ok {
		return nil
	}
	delete(c.entries, name)
	c.used -= e.size
	if e.version != version {
		return nil
	}
	return e.st
}

// put keeps st as the placement's inputs and status at version, if the budget allows.
func (c *foldCache) put(name, version string, st *stored) {
	if c == nil {
		return
	}
	// What a batch read of the reports is not part of the rows the version
	// stands for; the next batch reads the reports it needs again.
	st.in.Reports, st.in.ReportSeqs, st.in.Quarantined = nil, nil, nil
	size := sizeOf(st)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.swept) > idleAfter/2 {
		for n, e := range c.entries {
			if now.Sub(e.used) > idleAfter {
				delete(c.entries, n)
				c.used -= e.size
			}
		}
		c.swept = now
	}
	if old, ok := c.entries[name]; ok {
		c.used -= old.size
		delete(c.entries, name)
	}
	if c.used+size > c.budget {
		return
	}
	c.entries[name] = cacheEntry{version: version, st: st, size: size, used: now}
	c.used += size
}

// sizeOf estimates the memory a placement's decoded inputs and status hold, from
// what was measured of a placement on 100 clusters with six conditions each (250
// KB): about 2 KB for each cluster's status entry, 256 bytes for each cluster of
// the decision and of the progress, and a few kilobytes for the rest.
func sizeOf(st *stored) int64 {
	entries := len(st.status.PlacementStatuses)
	var other int
	if d := st.in.Decision; d != nil {
		other += len(d.Chosen) + len(d.Removed) + len(d.NotChosen)
	}
	if r := st.in.Rollout; r != nil {
		other += len(r.Clusters)
	}
	if s := st.in.Snapshot; s != nil {
		other += len(s.SelectedResources)
	}
	return 8<<10 + int64(entries)<<11 + int64(other)<<8
}

package schedule

import (
	"cmp"
	"slices"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

var notPickedYet = framework.Reason{Code: framework.ReasonNotPicked}

// pick chooses up to k entries, best first, calling picked for each choice
// and rest for every entry left, with why. It returns how many it chose.
//
// Without a spreader the best are the highest affinity scores, ties broken by
// name. With one, picks are made one at a time so that each sees the spread
// of those before it: the best is the highest topology spread score, then
// affinity, then name. Entries are bucketed by spread group and each bucket
// is ordered best first, so a step only compares the head of each bucket.
func pick(es []entry, k int, members *framework.MemberSet, sp framework.Spreader, scored bool,
	picked func(*entry), rest func(*entry, framework.Reason)) int {
	if k < 0 {
		k = 0
	}
	if scored {
		sortBest(es)
	}
	if sp == nil {
		n := min(k, len(es))
		for i := range es[:n] {
			picked(&es[i])
		}
		for i := range es[n:] {
			rest(&es[n+i], notPickedYet)
		}
		return n
	}

	b := bucket(es, members, sp)
	n := 0
	for n < k && len(b.active) > 0 {
		best, bestScore := -1, int32(0)
		var bestEntry *entry
		for ai, g := range b.active {
			reason, score := sp.Evaluate(int(g))
			if reason.Rejected() {
				continue
			}
			e := &es[b.order[b.heads[g]]]
			if best < 0 || score > bestScore ||
				score == bestScore && (e.affinity > bestEntry.affinity ||
					e.affinity == bestEntry.affinity && e.idx < bestEntry.idx) {
				best, bestScore, bestEntry = ai, score, e
			}
		}
		if best < 0 {
			break // every remaining group would break a DoNotSchedule constraint
		}
		bestEntry.spread = bestScore
		picked(bestEntry)
		n++
		b.advance(best)
		sp.Place(int(bestEntry.group))
	}
	for _, g := range b.active {
		reason := notPickedYet
		if n < k {
			reason, _ = sp.Evaluate(int(g))
		}
		for j := b.heads[g]; j < b.start[g+1]; j++ {
			rest(&es[b.order[j]], reason)
		}
	}
	return n
}

// scaleDown removes the remove lowest-scored entries. With a spreader, the
// score of an entry is that of placing it again after taking it out, so
// removals come from the most crowded domains first; affinity breaks ties, and
// among equals the last by name goes first.
func scaleDown(es []entry, remove int, members *framework.MemberSet, sp framework.Spreader, scored bool, removed func(*entry)) {
	// Worst first: lowest affinity, then last by name.
	slices.SortFunc(es, func(a, b entry) int {
		if scored {
			if c := cmp.Compare(a.affinity, b.affinity); c != 0 {
				return c
			}
		}
		return cmp.Compare(b.idx, a.idx)
	})
	if sp == nil {
		for i := range es[:min(remove, len(es))] {
			removed(&es[i])
		}
		return
	}
	b := bucket(es, members, sp)
	for range remove {
		if len(b.active) == 0 {
			return
		}
		worst, worstBroken, worstScore := -1, false, int32(0)
		var worstEntry *entry
		for ai, g := range b.active {
			sp.Unplace(int(g))
			reason, score := sp.Evaluate(int(g))
			sp.Place(int(g))
			broken := reason.Rejected()
			e := &es[b.order[b.heads[g]]]
			if worst < 0 || worse(broken, score, e, worstBroken, worstScore, worstEntry) {
				worst, worstBroken, worstScore, worstEntry = ai, broken, score, e
			}
		}
		removed(worstEntry)
		b.advance(worst)
		sp.Unplace(int(worstEntry.group))
	}
}

// worse reports whether removing e is preferable to removing the current worst.
func worse(broken bool, score int32, e *entry, wBroken bool, wScore int32, w *entry) bool {
	if broken != wBroken {
		return broken
	}
	if score != wScore {
		return score < wScore
	}
	if e.affinity != w.affinity {
		return e.affinity < w.affinity
	}
	return e.idx > w.idx
}

// buckets holds entries grouped by spread group, each group in entry order.
type buckets struct {
	order  []int32 // entry indexes, group by group
	start  []int32 // group g is order[start[g]:start[g+1]]
	heads  []int32 // next entry of each group
	active []int32 // groups with entries left
}

func bucket(es []entry, members *framework.MemberSet, sp framework.Spreader) *buckets {
	groups := sp.Groups()
	b := &buckets{start: make([]int32, groups+1), order: make([]int32, len(es))}
	for i := range es {
		g := int32(sp.Group(members.At(int(es[i].idx))))
		es[i].group = g
		b.start[g+1]++
	}
	for g := range groups {
		b.start[g+1] += b.start[g]
	}
	b.heads = slices.Clone(b.start[:groups])
	for i := range es {
		g := es[i].group
		b.order[b.heads[g]] = int32(i)
		b.heads[g]++
	}
	copy(b.heads, b.start[:groups])
	for g := range groups {
		if b.start[g] < b.start[g+1] {
			b.active = append(b.active, int32(g))
		}
	}
	return b
}

// advance moves past the head of the active group at position ai.
func (b *buckets) advance(ai int) {
	g := b.active[ai]
	b.heads[g]++
	if b.heads[g] == b.start[g+1] {
		b.active[ai] = b.active[len(b.active)-1]
		b.active = b.active[:len(b.active)-1]
	}
}

// sortBest orders entries by affinity, highest first, then by name. The
// entries arrive in name order, so each becomes one integer key (inverted
// affinity above, position below) and a plain integer sort does the work.
func sortBest(es []entry) {
	keys := make([]uint64, len(es))
	for i := range es {
		// Flipping the sign bit maps int32 order onto uint32 order.
		inv := uint32(-es[i].affinity) ^ 0x80000000
		keys[i] = uint64(inv)<<32 | uint64(i)
	}
	slices.Sort(keys)
	sorted := make([]entry, len(es))
	for i, k := range keys {
		sorted[i] = es[uint32(k)]
	}
	copy(es, sorted)
}

package plugins

import (
	"fmt"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// ScheduleAnywayPenalty is subtracted from the topology spread score of a pick
// that breaks a ScheduleAnyway constraint, so such picks come last.
const ScheduleAnywayPenalty = 1000

// TopologySpread spreads PickN placements over topology domains (the values of
// a label, e.g. region). Placing one more cluster in a domain holding c picks,
// when the emptiest domain holds min, is a violation if c+1-min > maxSkew:
// DoNotSchedule filters such picks, ScheduleAnyway scores them
// -ScheduleAnywayPenalty. Other picks score minus the change in skew
// (largest - smallest count), so picks that even out the spread come first.
// Domains are the label values seen on the clusters holding the placement and
// on the candidates; clusters without the label are outside the spread.
type TopologySpread struct{}

// Name implements framework.Plugin.
func (TopologySpread) Name() string { return "TopologySpread" }

// Spreader implements framework.SpreadPlugin.
func (TopologySpread) Spreader(c *framework.Cycle, placed, candidates []*framework.Member) framework.Spreader {
	cons := c.Policy.Spread
	if c.Policy.Type != framework.PickN || len(cons) == 0 {
		return nil
	}
	members := inPlay{placed: placed, candidates: candidates}
	s := &spreader{cons: cons, k: len(cons), counts: make([]domainCounts, len(cons))}
	doms, radix := s.domains(c.Members, members)
	groupOf := s.group(doms, radix)
	s.groupByMember = make([]int32, c.Members.Len())
	for i := range s.groupByMember {
		s.groupByMember[i] = -1
	}
	for i := range members.len() {
		s.groupByMember[members.at(i).Index()] = groupOf[i]
	}
	for ci := range s.counts {
		s.counts[ci].recount()
	}
	for i := range placed {
		s.Place(int(groupOf[i]))
	}
	return s
}

// inPlay is the members a spreader considers: the placed ones, then the
// candidates, without copying either.
type inPlay struct {
	placed, candidates []*framework.Member
}

func (m inPlay) len() int { return len(m.placed) + len(m.candidates) }

func (m inPlay) at(i int) *framework.Member {
	if i < len(m.placed) {
		return m.placed[i]
	}
	return m.candidates[i-len(m.placed)]
}

// domains returns the domain of every member in play, per constraint (k per
// member); -1 when the member lacks the key. Domain ids are dense over the
// members in play, so that a domain whose clusters are all out of the running
// does not count as empty. radix is each constraint's number of domains plus
// one, for the members without the key. It also sets up each constraint's
// domain counts.
func (s *spreader) domains(set *framework.MemberSet, members inPlay) (doms []int32, radix []int) {
	k, n := s.k, members.len()
	doms = make([]int32, n*k)
	radix = make([]int, k)
	for ci := range s.cons {
		key := s.cons[ci].TopologyKey
		col := set.Label(key)
		var dense []int32
		if col != nil {
			dense = make([]int32, len(col.Values()))
			for i := range dense {
				dense[i] = -1
			}
		}
		domains := int32(0)
		for i := range n {
			id := int32(-1)
			if col != nil {
				id = col.ID(members.at(i).Index())
			}
			if id < 0 {
				doms[i*k+ci] = -1
				continue
			}
			if dense[id] < 0 {
				dense[id] = domains
				domains++
			}
			doms[i*k+ci] = dense[id]
		}
		radix[ci] = int(domains) + 1
		s.counts[ci] = domainCounts{
			n: make([]int32, domains),
			violation: framework.Reason{Code: framework.ReasonTopologySpread, Message: fmt.Sprintf(
				"placing the resources on the cluster would violate topology spread constraint %q (max skew %d)",
				key, s.cons[ci].MaxSkew)},
		}
	}
	return doms, radix
}

// group returns the group of every member in play: members sitting in the
// same domains for every constraint form a group; group ids are dense,
// numbered as combinations appear. The combination is a number when the
// domains are few enough to index a slice, a string key otherwise.
func (s *spreader) group(doms []int32, radix []int) []int32 {
	k, n := s.k, len(doms)/s.k
	groupOf := make([]int32, n)
	if combos, ok := product(radix, 1<<16); ok {
		seen := make([]int32, combos)
		for i := range seen {
			seen[i] = -1
		}
		for i := range n {
			key, stride := 0, 1
			for ci := range k {
				key += int(doms[i*k+ci]+1) * stride
				stride *= radix[ci]
			}
			if seen[key] < 0 {
				seen[key] = s.addGroup(doms[i*k : (i+1)*k])
			}
			groupOf[i] = seen[key]
		}
		return groupOf
	}
	seen := make(map[string]int32)
	key := make([]byte, 4*k)
	for i := range n {
		for ci := range k {
			d := uint32(doms[i*k+ci])
			key[4*ci], key[4*ci+1], key[4*ci+2], key[4*ci+3] = byte(d), byte(d>>8), byte(d>>16), byte(d>>24)
		}
		g, ok := seen[string(key)] // no allocation for the lookup
		if !ok {
			g = s.addGroup(doms[i*k : (i+1)*k])
			seen[string(key)] = g
		}
		groupOf[i] = g
	}
	return groupOf
}

// addGroup adds a group sitting in the given domains (one per constraint).
func (s *spreader) addGroup(doms []int32) int32 {
	s.groupDoms = append(s.groupDoms, doms...)
	s.groups++
	return int32(s.groups - 1)
}

type spreader struct {
	cons          []framework.SpreadConstraint
	k             int
	counts        []domainCounts // per constraint
	groups        int
	groupDoms     []int32 // k domains per group
	groupByMember []int32 // by member index
}

// domainCounts counts picks per domain of one constraint, tracking the
// smallest and largest count incrementally.
type domainCounts struct {
	n        []int32
	min      int32
	minCount int32 // domains at min
	max      int32
	// violation is the constraint's rejection, rendered once.
	violation framework.Reason
}

func (d *domainCounts) recount() {
	if len(d.n) == 0 {
		return
	}
	d.min, d.max, d.minCount = d.n[0], d.n[0], 0
	for _, c := range d.n {
		d.min = min(d.min, c)
		d.max = max(d.max, c)
	}
	for _, c := range d.n {
		if c == d.min {
			d.minCount++
		}
	}
}

func (s *spreader) Groups() int { return s.groups }

func (s *spreader) Group(m *framework.Member) int { return int(s.groupByMember[m.Index()]) }

func (s *spreader) Evaluate(g int) (framework.Reason, int32) {
	var score int32
	for ci := range s.cons {
		d := s.groupDoms[g*s.k+ci]
		if d < 0 {
			continue
		}
		dc := &s.counts[ci]
		c := dc.n[d]
		if int(c+1-dc.min) > s.cons[ci].MaxSkew {
			if s.cons[ci].WhenUnsatisfiable == framework.ScheduleAnyway {
				score -= ScheduleAnywayPenalty
				continue
			}
			return dc.violation, 0
		}
		newMax, newMin := max(dc.max, c+1), dc.min
		if c == dc.min && dc.minCount == 1 {
			newMin++
		}
		score -= (newMax - newMin) - (dc.max - dc.min)
	}
	return framework.Reason{}, score
}

func (s *spreader) Place(g int) {
	for ci := range s.cons {
		d := s.groupDoms[g*s.k+ci]
		if d < 0 {
			continue
		}
		dc := &s.counts[ci]
		c := dc.n[d]
		dc.n[d]++
		dc.max = max(dc.max, c+1)
		if c == dc.min {
			if dc.minCount--; dc.minCount == 0 {
				dc.recount()
			}
		}
	}
}

func (s *spreader) Unplace(g int) {
	for ci := range s.cons {
		d := s.groupDoms[g*s.k+ci]
		if d < 0 {
			continue
		}
		dc := &s.counts[ci]
		c := dc.n[d]
		dc.n[d]--
		switch {
		case c-1 < dc.min:
			dc.min, dc.minCount = c-1, 1
		case c-1 == dc.min:
			dc.minCount++
		}
		if c == dc.max {
			dc.recount()
		}
	}
}

// product multiplies the radixes, reporting false once it exceeds limit.
func product(radix []int, limit int) (int, bool) {
	p := 1
	for _, r := range radix {
		p *= r
		if p > limit {
			return 0, false
		}
	}
	return p, true
}

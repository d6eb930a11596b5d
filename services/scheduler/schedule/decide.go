// Package schedule decides where a placement goes: given its compiled policy,
// the member clusters and the previous decision, Decide returns the chosen
// clusters with their scores, the clusters removed and the clusters not
// chosen, each with a reason.
//
// Decisions are sticky, as in Fleet. Under an unchanged policy key (numberOfClusters
// aside) clusters already chosen are not re-evaluated: they stay until they
// leave the fleet, raising numberOfClusters only adds, lowering it removes the
// lowest-scored, a PickN placement replaces a cluster that left, and a PickAll
// placement takes in every new eligible cluster. A new policy key re-evaluates
// every cluster, keeping those already chosen that still fit before adding
// others. A cluster that misses heartbeats keeps what it holds but is not
// chosen anew.
//
// Decide is pure: no clock, no I/O. A service keeps the members and each
// placement's last decision in memory and calls it on every change.
package schedule

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/plugins"
)

// Scheduler makes decisions with one plugin profile. It holds no state and is
// safe for concurrent use.
type Scheduler struct {
	profile framework.Profile
}

// New returns a scheduler running the plugins of profile.
func New(profile framework.Profile) *Scheduler { return &Scheduler{profile: profile} }

var defaultScheduler = New(plugins.Default())

// Decide decides with the default plugins; see Scheduler.Decide.
func Decide(policy *framework.Policy, members *framework.MemberSet, previous *Decision, now time.Time) *Decision {
	return defaultScheduler.Decide(policy, members, previous, now)
}

// Decide places policy over members at now. previous is the placement's last
// decision, or nil for a new placement; it is not modified.
func (s *Scheduler) Decide(policy *framework.Policy, members *framework.MemberSet, previous *Decision, now time.Time) *Decision {
	return s.decide(policy, members, previous, now, nil)
}

// decide is Decide with the clusters in excluded not chosen anew, each for its reason.
func (s *Scheduler) decide(policy *framework.Policy, members *framework.MemberSet, previous *Decision, now time.Time, excluded map[string]framework.Reason) *Decision {
	r := &run{
		excluded: excluded,
		s:        s,
		p:        policy,
		cy:       framework.NewCycle(policy, members, now),
		prev:     previous,
		sticky:   previous != nil && previous.PolicyKey == policy.Key && previous.Type == policy.Type,
		out:      make([]outcome, members.Len()),
	}
	r.reasons = append(r.reasons, framework.Reason{}) // index 0: no reason
	r.collectHeld()
	for _, p := range s.profile.Filters {
		if f := p.Filterer(r.cy); f != nil {
			r.filters = append(r.filters, f)
		}
	}
	switch policy.Type {
	case framework.PickFixed:
		r.pickFixed()
	case framework.PickN:
		r.pickN()
	default:
		r.pickAll()
	}
	return r.decision()
}

type outcomeKind uint8

const (
	undecided outcomeKind = iota
	chosen
	removed
	notChosen
)

// outcome is what the decision does with one member, by member index. It
// holds no pointers and an index into run.reasons, to keep the per-member
// slice small for 5,000 members.
type outcome struct {
	kind   outcomeKind
	kept   bool // chosen: kept rather than added
	reason int32
	scores Scores
}

// entry is a member in the running for a pick, by member index.
type entry struct {
	idx      int32
	group    int32
	affinity int32
	spread   int32
}

type run struct {
	s      *Scheduler
	p      *framework.Policy
	cy     *framework.Cycle
	prev   *Decision
	sticky bool
	out    []outcome
	// reasons are the outcomes' reasons; most members share a few.
	reasons []framework.Reason
	// filters are the profile's filters prepared for this decision.
	filters []framework.Filterer
	// gone lists previously chosen clusters that are no longer members, and
	// PickFixed names that are not members.
	gone    []Unchosen
	missing []Unchosen
	// excluded are clusters failover keeps from being chosen anew (lost ones).
	excluded map[string]framework.Reason
}

var (
	reasonLeft        = framework.Reason{Code: framework.ReasonLeft, Message: "the cluster is no longer a member of the fleet"}
	reasonGoneAway    = framework.Reason{Code: framework.ReasonNotJoined, Message: "the cluster is no longer joined to the fleet"}
	reasonLeaving     = framework.Reason{Code: framework.ReasonLeaving, Message: "the cluster is leaving the fleet"}
	reasonNotFound    = framework.Reason{Code: framework.ReasonNotFound, Message: "no member cluster has this name"}
	reasonNotNamed    = framework.Reason{Code: framework.ReasonNotInClusterNames, Message: "the policy no longer names the cluster"}
	reasonScaleDown   = framework.Reason{Code: framework.ReasonScaledDown, Message: "numberOfClusters was lowered and the cluster scored lowest"}
	reasonUnreachable = framework.Reason{Code: framework.ReasonUnreachable, Message: "the cluster's heartbeats say its API server is unreachable"}
)

// collectHeld marks the previously chosen clusters: kept (with their recorded
// scores) while they remain joined members, removed otherwise.
func (r *run) collectHeld() {
	if r.prev == nil {
		return
	}
	for _, c := range r.prev.Chosen {
		m, ok := r.cy.Members.Get(c.Cluster)
		if !ok {
			r.gone = append(r.gone, Unchosen{Cluster: c.Cluster, Reason: reasonLeft})
			continue
		}
		switch {
		case !m.Joined:
			r.remove(m.Index(), reasonGoneAway)
		case m.Leaving:
			r.remove(m.Index(), reasonLeaving)
		case r.p.Namespace != "" && m.NamespaceReason(r.p.Namespace).Rejected():
			// Unlike affinity, not ignored during execution: without its
			// namespace the cluster cannot hold a ResourcePlacement's objects.
			r.remove(m.Index(), m.NamespaceReason(r.p.Namespace))
		default:
			r.out[m.Index()] = outcome{kind: chosen, kept: true, scores: c.Scores}
			r.cy.MarkHeld(m)
		}
	}
}

// remove marks member i removed for reason.
func (r *run) remove(i int, reason framework.Reason) {
	r.out[i] = outcome{kind: removed, reason: r.reason(reason)}
}

// reject marks member i not chosen for reason.
func (r *run) reject(i int, reason framework.Reason) {
	r.out[i] = outcome{kind: notChosen, reason: r.reason(reason)}
}

// choose marks member i chosen.
func (r *run) choose(i int, kept bool, scores Scores) {
	r.out[i] = outcome{kind: chosen, kept: kept, scores: scores}
}

// reason interns a reason. Most rejections share one of a few reasons, so
// the last few are looked up before appending.
func (r *run) reason(reason framework.Reason) int32 {
	for i := len(r.reasons) - 1; i >= max(0, len(r.reasons)-8); i-- {
		if r.reasons[i] == reason {
			return int32(i)
		}
	}
	r.reasons = append(r.reasons, reason)
	return int32(len(r.reasons) - 1)
}

// filter runs the filter plugins; the first rejection wins.
func (r *run) filter(m *framework.Member) framework.Reason {
	if reason, ok := r.excluded[m.Name]; ok {
		return reason
	}
	if m.Unreachable {
		return reasonUnreachable
	}
	for _, f := range r.filters {
		if reason := f.Filter(m); reason.Rejected() {
			return reason
		}
	}
	return framework.Reason{}
}

// refilter re-evaluates a held cluster under a changed policy; it returns
// false after marking the cluster removed.
func (r *run) refilter(m *framework.Member) bool {
	reason := r.filter(m)
	if !reason.Rejected() {
		return true
	}
	reason.Message = "the updated policy rejects the cluster: " + reason.Message
	r.remove(m.Index(), reason)
	return false
}

func (r *run) pickAll() {
	for i, m := range r.cy.Members.All() {
		switch r.out[i].kind {
		case chosen:
			if !r.sticky && r.refilter(m) {
				r.out[i].scores = Scores{}
			}
		case undecided:
			if reason := r.filter(m); reason.Rejected() {
				r.reject(i, reason)
			} else {
				r.choose(i, false, Scores{})
			}
		}
	}
}

func (r *run) pickFixed() {
	names := r.p.ClusterNames
	for i, m := range r.cy.Members.All() {
		if r.out[i].kind == chosen {
			if _, named := slices.BinarySearch(names, m.Name); !named {
				r.remove(i, reasonNotNamed)
			}
		}
	}
	for _, name := range names {
		m, ok := r.cy.Members.Get(name)
		if !ok {
			r.missing = append(r.missing, Unchosen{Cluster: name, Reason: reasonNotFound})
			continue
		}
		if r.out[m.Index()].kind != undecided {
			continue // kept, or removed for leaving
		}
		if reason := r.filter(m); reason.Rejected() {
			r.reject(m.Index(), reason)
		} else {
			r.choose(m.Index(), false, Scores{})
		}
	}
}

func (r *run) pickN() {
	n := r.p.NumberOfClusters
	held := make([]entry, 0, len(r.prev.chosenOrNil()))
	cands := make([]entry, 0, r.cy.Members.Len())
	for i, m := range r.cy.Members.All() {
		switch r.out[i].kind {
		case chosen:
			if r.sticky || r.refilter(m) {
				held = append(held, entry{idx: int32(i)})
			}
		case undecided:
			if reason := r.filter(m); reason.Rejected() {
				r.reject(i, reason)
			} else {
				cands = append(cands, entry{idx: int32(i)})
			}
		}
	}

	notPicked := r.reason(framework.Reason{Code: framework.ReasonNotPicked,
		Message: fmt.Sprintf("the placement already has the %d clusters its policy asks for", n)})
	if r.sticky && len(held) == n {
		// Nothing to add or remove: no need to score.
		for _, e := range cands {
			r.out[e.idx] = outcome{kind: notChosen, reason: notPicked}
		}
		return
	}

	all := make([]*framework.Member, 0, len(held)+len(cands))
	for _, es := range [][]entry{held, cands} {
		for _, e := range es {
			all = append(all, r.cy.Members.At(int(e.idx)))
		}
	}
	heldMembers, candMembers := all[:len(held):len(held)], all[len(held):]
	scored := r.score(held, cands, all)
	add := func(kept bool) func(e *entry) {
		return func(e *entry) {
			r.choose(int(e.idx), kept, Scores{Affinity: e.affinity, TopologySpread: e.spread})
		}
	}
	notChosenFor := func(e *entry, reason framework.Reason) {
		if reason.Code == framework.ReasonNotPicked {
			r.out[e.idx] = outcome{kind: notChosen, reason: notPicked}
			return
		}
		r.reject(int(e.idx), reason)
	}

	if r.sticky {
		var sp framework.Spreader
		if r.s.profile.Spread != nil {
			sp = r.s.profile.Spread.Spreader(r.cy, heldMembers, candMembers)
		}
		if len(held) > n {
			scaleDown(held, len(held)-n, r.cy.Members, sp, scored, func(e *entry) {
				r.remove(int(e.idx), reasonScaleDown)
			})
			for _, e := range cands {
				r.out[e.idx] = outcome{kind: notChosen, reason: notPicked}
			}
			return
		}
		pick(cands, n-len(held), r.cy.Members, sp, scored, add(false), notChosenFor)
		return
	}

	// A changed policy: the clusters already chosen that still fit go first,
	// then the other candidates, all spread as one set.
	var sp framework.Spreader
	if r.s.profile.Spread != nil {
		sp = r.s.profile.Spread.Spreader(r.cy, nil, all)
	}
	dropped := framework.Reason{Code: framework.ReasonNotPicked,
		Message: fmt.Sprintf("the updated policy needs %d clusters and picked higher-scored ones", n)}
	kept := pick(held, n, r.cy.Members, sp, scored, add(true), func(e *entry, reason framework.Reason) {
		if reason.Code == framework.ReasonNotPicked {
			reason = dropped
		} else {
			reason.Message = "the updated policy rejects the cluster: " + reason.Message
		}
		r.remove(int(e.idx), reason)
	})
	pick(cands, n-kept, r.cy.Members, sp, scored, add(false), notChosenFor)
}

// score fills in the affinity scores of held and candidate entries; it reports
// whether any plugin scored (if none did, entries stay in name order).
func (r *run) score(held, cands []entry, all []*framework.Member) bool {
	var scorers []framework.Scorer
	for _, p := range r.s.profile.Scorers {
		if sc := p.Scorer(r.cy, all); sc != nil {
			scorers = append(scorers, sc)
		}
	}
	if len(scorers) == 0 {
		return false
	}
	for _, es := range [][]entry{held, cands} {
		for i := range es {
			m := r.cy.Members.At(int(es[i].idx))
			var total int32
			for _, sc := range scorers {
				total += sc.Score(m)
			}
			es[i].affinity = total
		}
	}
	return true
}

// decision assembles the outcome, in name order.
func (r *run) decision() *Decision {
	d := &Decision{PolicyKey: r.p.Key, Type: r.p.Type}
	if r.p.Type == framework.PickN {
		d.NumberOfClusters = r.p.NumberOfClusters
	}
	var nChosen, nRemoved, nNot int
	for i := range r.out {
		switch r.out[i].kind {
		case chosen:
			nChosen++
		case removed:
			nRemoved++
		case notChosen:
			nNot++
		}
	}
	d.Chosen = make([]Chosen, 0, nChosen)
	if nRemoved+len(r.gone) > 0 {
		d.Removed = make([]Unchosen, 0, nRemoved+len(r.gone))
	}
	if nNot+len(r.missing) > 0 {
		d.NotChosen = make([]Unchosen, 0, nNot+len(r.missing))
	}
	for i, m := range r.cy.Members.All() {
		o := &r.out[i]
		switch o.kind {
		case chosen:
			action := Added
			if o.kept {
				action = Kept
			}
			d.Chosen = append(d.Chosen, Chosen{Cluster: m.Name, Action: action, Scores: o.scores})
		case removed:
			d.Removed = append(d.Removed, Unchosen{Cluster: m.Name, Reason: r.reasons[o.reason]})
		case notChosen:
			d.NotChosen = append(d.NotChosen, Unchosen{Cluster: m.Name, Reason: r.reasons[o.reason]})
		}
	}
	byName := func(a, b Unchosen) int { return cmp.Compare(a.Cluster, b.Cluster) }
	if len(r.gone) > 0 {
		d.Removed = append(d.Removed, r.gone...)
		slices.SortFunc(d.Removed, byName)
	}
	if len(r.missing) > 0 {
		d.NotChosen = append(d.NotChosen, r.missing...)
		slices.SortFunc(d.NotChosen, byName)
	}
	switch r.p.Type {
	case framework.PickN:
		d.Needed = r.p.NumberOfClusters
	case framework.PickFixed:
		d.Needed = len(r.p.ClusterNames)
	default:
		d.Needed = len(d.Chosen)
	}
	d.Fulfilled = len(d.Chosen) >= d.Needed
	return d
}

func (d *Decision) chosenOrNil() []Chosen {
	if d == nil {
		return nil
	}
	return d.Chosen
}

package schedule

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// SilentPeriods is how many heartbeat periods may pass without a heartbeat
// before a member counts as down for failover.
const SilentPeriods = 1.5

// Liveness is what the scheduler knows of a member's health. The service reads it
// from PostgreSQL in the decision's transaction, never from a replica's memory, so
// a replica that has not taken in the latest heartbeats cannot think a member lost.
type Liveness struct {
	// Heartbeat is when the bus received the member's latest heartbeat (or when it
	// joined, before the first).
	Heartbeat time.Time
	Period    time.Duration
	// Healthy is what the latest heartbeat said, Message why not; Since is when
	// the member last became healthy or unhealthy (a heartbeat after silence
	// counts as becoming healthy).
	Healthy bool
	Message string
	Since   time.Time
}

// silentAt is when the member goes down if no heartbeat arrives.
func (l Liveness) silentAt() time.Time {
	return l.Heartbeat.Add(time.Duration(SilentPeriods * float64(l.Period)))
}

// DownSince reports whether the member is down at now, since when, and why.
func (l Liveness) DownSince(now time.Time) (since time.Time, why string, down bool) {
	if !l.Healthy {
		since, why, down = l.Since, "its heartbeats say its API server is unreachable", true
		if l.Message != "" {
			why += ": " + l.Message
		}
	}
	if s := l.silentAt(); now.After(s) && (!down || s.Before(since)) {
		since, why, down = s, fmt.Sprintf("no heartbeat arrived for %v heartbeat periods of %s", SilentPeriods, l.Period), true
	}
	return since, why, down
}

// FailoverPolicy is how failover treats one placement at one decision.
type FailoverPolicy struct {
	// After is the grace period: a member down this long is lost.
	After time.Duration
	// FailbackAfter, when positive, moves a placement back to the member it
	// failed over from once that member has been healthy this long.
	FailbackAfter time.Duration
	// Live is the liveness of the clusters of the previous decision: the chosen
	// ones and those its moves name. A cluster missing here is never lost.
	Live map[string]Liveness
	// HeardUpTo, when set and earlier than the decision's time, is when the
	// decider last heard the fleet (it is behind its events): liveness is judged
	// as of then, so that heartbeats not yet taken in do not count as silence.
	HeardUpTo time.Time
}

// Note says what failover did on a cluster: api.ClusterLostReason, ...
type Note struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Released is a cluster a failover or failback moved the placement away from.
// Its copy stays until the placement is available on the chosen clusters and,
// when Lost, until the cluster is back (make-before-break).
type Released struct {
	Cluster string `json:"cluster"`
	Lost    bool   `json:"lost,omitempty"`
	Note    Note   `json:"note"`
}

// Move is a failover the placement made: it left From for To. A failback moves
// it back to From.
type Move struct {
	From   string    `json:"from"`
	To     string    `json:"to"`
	LostAt time.Time `json:"lostAt"`
}

// Step is one thing failover did in a decision, for the history.
type Step struct {
	// Kind is "lost", "failover", "returned" or "failback".
	Kind     string
	From, To string
	Message  string
}

// DecideFailover decides with the default plugins; see Scheduler.DecideFailover.
func DecideFailover(policy *framework.Policy, members *framework.MemberSet, previous *Decision, now time.Time, fo FailoverPolicy) (*Decision, time.Time) {
	return defaultScheduler.DecideFailover(policy, members, previous, now, fo)
}

// DecideFailover is Decide with failover. A PickN placement on a member down for
// fo.After gets a replacement cluster under its policy; the lost cluster goes to
// Released and its copy stays until the replacement is available and it is back.
// PickAll and PickFixed placements note the loss and wait. With fo.FailbackAfter
// set, a placement moves back to the member it failed over from once that member
// has been healthy that long, and the replacement goes to Released. It returns the
// decision and when it may change with no other event (zero: no timer).
func (s *Scheduler) DecideFailover(policy *framework.Policy, members *framework.MemberSet, previous *Decision, now time.Time, fo FailoverPolicy) (*Decision, time.Time) {
	f := &failover{s: s, p: policy, members: members, prev: previous, now: now, fo: fo, lost: map[string]lostCluster{}, waiting: map[string]lostCluster{}}
	f.detect()
	d := f.decide()
	f.finish(d)
	return d, f.wake
}

// lostCluster is a chosen cluster found lost, when and why.
type lostCluster struct {
	at  time.Time
	why string
}

type failover struct {
	s       *Scheduler
	p       *framework.Policy
	members *framework.MemberSet
	prev    *Decision
	now     time.Time
	fo      FailoverPolicy

	lost    map[string]lostCluster // chosen clusters lost now, to replace
	waiting map[string]lostCluster // chosen clusters lost now, not replaced
	// down are the clusters of the previous decision that are down now but
	// not chosen (lost before, their copies kept): never chosen anew while
	// down. The plain filters allow a member more missed heartbeats
	// (framework.MissedHeartbeats) than failover does, so without this a
	// member lost before would be the next lost member's replacement.
	down     map[string]framework.Reason
	failback map[string]Move // by From: moves to undo now
	wake     time.Time
	steps    []Step
}

func (f *failover) later(t time.Time) {
	if f.wake.IsZero() || t.Before(f.wake) {
		f.wake = t
	}
}

// detect finds the chosen clusters that are lost, the moves to undo, and when
// either may next happen.
func (f *failover) detect() {
	if f.fo.After <= 0 {
		return
	}
	if f.prev == nil {
		// A first decision has no liveness to judge (it is read for the clusters of
		// the previous decision): decide again at once, with this one as the
		// previous, which sets the timer. Without it, a cluster that falls silent
		// before any other event re-decides the placement would never be found lost.
		f.later(f.now)
		return
	}
	now := f.now
	if h := f.fo.HeardUpTo; !h.IsZero() && h.Before(now) {
		now = h
	}
	f.down = map[string]framework.Reason{}
	chosen := make(map[string]bool, len(f.prev.Chosen))
	for _, c := range f.prev.Chosen {
		chosen[c.Cluster] = true
	}
	for name, lv := range f.fo.Live {
		if chosen[name] {
			continue
		}
		if _, why, down := lv.DownSince(now); down {
			f.down[name] = framework.Reason{Code: framework.ReasonLost, Message: "the cluster is down: " + why}
		}
	}
	for _, c := range f.prev.Chosen {
		lv, ok := f.fo.Live[c.Cluster]
		if !ok {
			continue
		}
		since, why, down := lv.DownSince(now)
		if !down {
			f.later(lv.silentAt().Add(f.fo.After))
			continue
		}
		at := since.Add(f.fo.After)
		if now.Before(at) {
			f.later(at)
			continue
		}
		f.lost[c.Cluster] = lostCluster{at: at, why: fmt.Sprintf("it has been down since %s (%s), longer than the failover grace period of %s",
			since.UTC().Format(time.RFC3339), why, f.fo.After)}
	}
	if f.fo.FailbackAfter <= 0 || f.p.Type != framework.PickN {
		return
	}
	f.failback = map[string]Move{}
	for _, m := range f.prev.Moves {
		lv, ok := f.fo.Live[m.From]
		member, isMember := f.members.Get(m.From)
		if !ok || !isMember || !member.Joined || member.Leaving || !f.prev.holds(m.To) || f.lost[m.To] != (lostCluster{}) {
			continue
		}
		if _, _, down := lv.DownSince(now); down {
			continue // its coming back is a heartbeat, which re-decides
		}
		at := lv.Since.Add(f.fo.FailbackAfter)
		if now.Before(at) {
			f.later(at)
			continue
		}
		f.failback[m.From] = m
	}
}

// decide runs the decision: for PickN without the lost clusters (a replacement
// is picked under the policy) and with each failback's original cluster in
// place of its replacement. Lost clusters that are not replaced wait.
func (f *failover) decide() *Decision {
	if f.p.Type != framework.PickN {
		f.waiting, f.lost = f.lost, map[string]lostCluster{}
	}
	if f.prev == nil || len(f.lost)+len(f.failback) == 0 {
		return f.s.decide(f.p, f.members, f.prev, f.now, f.down)
	}
	base := *f.prev
	base.Chosen = nil
	excluded := map[string]framework.Reason{}
	maps.Copy(excluded, f.down)
	back := map[string]string{} // To -> From
	for from, m := range f.failback {
		back[m.To] = from
	}
	var lost []Chosen
	for _, c := range f.prev.Chosen {
		if l, ok := f.lost[c.Cluster]; ok {
			excluded[c.Cluster] = framework.Reason{Code: framework.ReasonLost, Message: "the cluster is lost: " + l.why}
			lost = append(lost, c)
			continue
		}
		if from, ok := back[c.Cluster]; ok {
			excluded[c.Cluster] = framework.Reason{Code: framework.ReasonNotPicked, Message: "the placement fails back to " + from}
			c.Cluster = from
		}
		base.Chosen = append(base.Chosen, c)
	}
	byName := func(a, b Chosen) int { return strings.Compare(a.Cluster, b.Cluster) }
	slices.SortFunc(base.Chosen, byName)
	d := f.s.decide(f.p, f.members, &base, f.now, excluded)
	if len(f.lost) > 0 && len(f.added(d)) < len(f.lost) {
		// Not enough replacements: the lost clusters stay (and say so) rather
		// than leave the placement short; a later decision tries again.
		for _, c := range lost {
			delete(excluded, c.Cluster)
		}
		f.waiting, f.lost = f.lost, map[string]lostCluster{}
		base.Chosen = append(base.Chosen, lost...)
		slices.SortFunc(base.Chosen, byName)
		d = f.s.decide(f.p, f.members, &base, f.now, excluded)
	}
	return d
}

// added lists the clusters d added that no failback brought back, in name order.
func (f *failover) added(d *Decision) []string {
	var out []string
	for _, c := range d.Chosen {
		if _, ok := f.failback[c.Cluster]; c.Action == Added && !ok {
			out = append(out, c.Cluster)
		}
	}
	return out
}

// finish carries the failover state of the previous decision into d and adds
// what this decision did: notes on chosen clusters, released clusters, moves
// and the steps for the history.
func (f *failover) finish(d *Decision) {
	st := &failoverState{notes: map[string]Note{}, released: map[string]Released{}}
	if f.prev != nil {
		for _, c := range f.prev.Chosen {
			if c.Failover != nil {
				st.notes[c.Cluster] = *c.Failover
			}
		}
		for _, r := range f.prev.Released {
			st.released[r.Cluster] = r
		}
		st.moves = slices.Clone(f.prev.Moves)
	}
	f.noteWaiting(st)
	f.noteMoves(d, st)
	f.noteFailback(d, st)
	f.noteReturned(st)

	chosen := map[string]bool{}
	for i := range d.Chosen {
		c := &d.Chosen[i]
		chosen[c.Cluster] = true
		if n, ok := st.notes[c.Cluster]; ok {
			c.Failover = &n
		}
	}
	for name, r := range st.released {
		if m, ok := f.members.Get(name); chosen[name] || !ok || !m.Joined {
			continue // chosen again, or gone from the fleet: the rollout deals with it
		}
		d.Released = append(d.Released, r)
	}
	slices.SortFunc(d.Released, func(a, b Released) int { return strings.Compare(a.Cluster, b.Cluster) })
	d.Moves = slices.DeleteFunc(st.moves, func(m Move) bool { return chosen[m.From] || !chosen[m.To] })
	if len(d.Moves) == 0 {
		d.Moves = nil
	}
	d.NotChosen = slices.DeleteFunc(d.NotChosen, func(u Unchosen) bool {
		_, r := st.released[u.Cluster]
		return r && !chosen[u.Cluster]
	})
	d.Steps = f.steps
}

// failoverState is the failover state finish builds: notes by chosen cluster,
// released clusters by name, and the moves.
type failoverState struct {
	notes    map[string]Note
	released map[string]Released
	moves    []Move
}

func (f *failover) step(kind, from, to, message string) {
	f.steps = append(f.steps, Step{Kind: kind, From: from, To: to, Message: message})
}

// noteWaiting notes the lost clusters the placement stays on (PickAll, PickFixed,
// or PickN with no replacement), and clears the note of those back.
func (f *failover) noteWaiting(st *failoverState) {
	for name, n := range st.notes {
		_, still := f.waiting[name]
		if (n.Reason == api.ClusterLostReason || n.Reason == api.NoFailoverReplacementReason) && !still {
			delete(st.notes, name)
			if _, replaced := f.lost[name]; !replaced {
				f.step("returned", name, "", fmt.Sprintf("%s is back; the placement stayed on it", name))
			}
		}
	}
	for _, name := range sortedKeys(f.waiting) {
		l := f.waiting[name]
		n := Note{Reason: api.ClusterLostReason, Message: fmt.Sprintf("%s is lost: %s; a %s placement does not fail over: it waits for the cluster to return",
			name, l.why, f.p.Type)}
		if f.p.Type == framework.PickN {
			n = Note{Reason: api.NoFailoverReplacementReason, Message: fmt.Sprintf("%s is lost: %s; no other cluster fits the placement's policy, so it stays until one does or the cluster returns",
				name, l.why)}
		}
		if st.notes[name].Reason != n.Reason {
			f.step("lost", name, "", n.Message)
		}
		st.notes[name] = n
	}
}

// noteMoves pairs the lost clusters with their replacements, in name order.
func (f *failover) noteMoves(d *Decision, st *failoverState) {
	if len(f.lost) == 0 {
		return
	}
	added := f.added(d)
	for i, from := range sortedKeys(f.lost) {
		to, l := added[i], f.lost[from]
		st.moves = append(st.moves, Move{From: from, To: to, LostAt: l.at})
		st.notes[to] = Note{Reason: api.FailoverReplacementScheduledReason, Message: fmt.Sprintf(
			"the placement failed over to %s from %s, which is lost: %s", to, from, l.why)}
		st.released[from] = Released{Cluster: from, Lost: true, Note: Note{Reason: api.ClusterLostReason, Message: fmt.Sprintf(
			"%s is lost: %s; the placement failed over to %s; the copy on %s is removed once %s is available and %s is back",
			from, l.why, to, from, to, from)}}
		delete(st.notes, from)
		f.step("failover", from, to, st.released[from].Note.Message)
	}
}

// noteFailback records the failbacks: the original cluster is added again and
// the replacement released.
func (f *failover) noteFailback(d *Decision, st *failoverState) {
	for _, from := range sortedKeys(f.failback) {
		m := f.failback[from]
		for i := range d.Chosen {
			if d.Chosen[i].Cluster == from {
				d.Chosen[i].Action = Added
			}
		}
		since := f.fo.Live[from].Since
		st.notes[from] = Note{Reason: api.FailbackScheduledReason, Message: fmt.Sprintf(
			"%s has been healthy since %s, longer than the failback period of %s: the placement moves back to it from %s",
			from, since.UTC().Format(time.RFC3339), f.fo.FailbackAfter, m.To)}
		st.released[m.To] = Released{Cluster: m.To, Note: Note{Reason: api.FailbackReleasedReason, Message: fmt.Sprintf(
			"the placement moves back to %s; the copy on %s is removed once %s is available", from, m.To, from)}}
		delete(st.notes, m.To)
		delete(st.released, from)
		st.moves = slices.DeleteFunc(st.moves, func(x Move) bool { return x == m })
		f.step("failback", m.To, from, st.notes[from].Message)
	}
}

// noteReturned marks the lost clusters that are back: their copies may go once
// the placement is available on the chosen clusters.
func (f *failover) noteReturned(st *failoverState) {
	for _, name := range sortedKeys(st.released) {
		r := st.released[name]
		lv, ok := f.fo.Live[name]
		if !r.Lost || !ok {
			continue
		}
		if _, _, down := lv.DownSince(f.now); down {
			continue
		}
		to := ""
		for _, m := range st.moves {
			if m.From == name {
				to = m.To
			}
		}
		r.Lost = false
		r.Note = Note{Reason: api.LostClusterReturnedReason, Message: fmt.Sprintf(
			"%s is back; its copy is removed once the placement is available on the chosen clusters", name)}
		if to != "" {
			r.Note.Message = fmt.Sprintf("%s is back; its copy is removed once the placement is available on %s", name, to)
		}
		st.released[name] = r
		f.step("returned", name, to, r.Note.Message)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

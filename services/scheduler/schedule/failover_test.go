package schedule

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
)

const grace = 30 * time.Second

// up is a member heard from just now, healthy for an hour.
func up() Liveness {
	return Liveness{Heartbeat: now.Add(-time.Second), Period: 10 * time.Second, Healthy: true, Since: now.Add(-time.Hour)}
}

// unreachable is a member whose heartbeats have said for d that its API server is unreachable.
func unreachable(d time.Duration) Liveness {
	return Liveness{Heartbeat: now.Add(-time.Second), Period: 10 * time.Second, Healthy: false, Message: "connection refused", Since: now.Add(-d)}
}

// silent is a member whose last heartbeat arrived d ago.
func silent(d time.Duration) Liveness {
	return Liveness{Heartbeat: now.Add(-d), Period: 10 * time.Second, Healthy: true, Since: now.Add(-time.Hour)}
}

func live(kv map[string]Liveness) FailoverPolicy {
	return FailoverPolicy{After: grace, Live: kv}
}

func names(cs []Chosen) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Cluster
	}
	return out
}

func note(d *Decision, cluster string) string {
	for _, c := range d.Chosen {
		if c.Cluster == cluster && c.Failover != nil {
			return c.Failover.Reason
		}
	}
	return ""
}

func released(d *Decision) []Released {
	return d.Released
}

func TestLivenessDownSince(t *testing.T) {
	for _, tt := range []struct {
		name  string
		l     Liveness
		down  bool
		since time.Time
	}{
		{"healthy and heard from", up(), false, time.Time{}},
		{"unreachable", unreachable(time.Minute), true, now.Add(-time.Minute)},
		{"silent for less than 1.5 periods", silent(14 * time.Second), false, time.Time{}},
		{"silent for more than 1.5 periods", silent(40 * time.Second), true, now.Add(-25 * time.Second)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			since, why, down := tt.l.DownSince(now)
			if down != tt.down || (down && !since.Equal(tt.since)) {
				t.Fatalf("DownSince = %v, %v (%s), want %v, %v", since, down, why, tt.since, tt.down)
			}
		})
	}
}

func TestFailoverPickNMovesToAReplacementAfterTheGracePeriod(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"), cluster("m3"))
	p := policy(t, "placementType: PickN\nnumberOfClusters: 2")
	first := Decide(p, ms, nil, now)
	if got := names(first.Chosen); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("first decision chose %v", got)
	}

	// Down, but within the grace period: nothing moves, and the decision says when to look again.
	d, wake := DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": unreachable(10 * time.Second), "m2": up()}))
	if d.Changed(first) || !wake.Equal(now.Add(20*time.Second)) {
		t.Fatalf("within grace: changed %v, wake %v; want no change and a wake in 20s", d.Changed(first), wake)
	}

	// Lost: m3 replaces m1, which keeps its copy (released, lost) until it is back.
	d, _ = DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": unreachable(time.Minute), "m2": up()}))
	if got := names(d.Chosen); !slices.Equal(got, []string{"m2", "m3"}) {
		t.Fatalf("after the grace period chose %v, want [m2 m3]", got)
	}
	if note(d, "m3") != api.FailoverReplacementScheduledReason {
		t.Errorf("m3's note = %q", note(d, "m3"))
	}
	if r := released(d); len(r) != 1 || r[0].Cluster != "m1" || !r[0].Lost || r[0].Note.Reason != api.ClusterLostReason {
		t.Fatalf("released = %+v, want m1 lost", r)
	}
	if len(d.Removed) != 0 {
		t.Errorf("removed = %+v: a lost cluster is released, not removed", d.Removed)
	}
	if len(d.Steps) != 1 || d.Steps[0].Kind != "failover" || d.Steps[0].From != "m1" || d.Steps[0].To != "m3" {
		t.Errorf("steps = %+v", d.Steps)
	}
	if !d.Changed(first) {
		t.Error("the failover is not a change")
	}

	// Still lost: the same decision.
	again, _ := DecideFailover(p, ms, d, now.Add(time.Second), live(map[string]Liveness{"m1": unreachable(time.Minute), "m2": up(), "m3": up()}))
	if again.Changed(d) || len(again.Steps) != 0 {
		t.Fatalf("an unchanged fleet changed the decision: %+v", again)
	}

	// m1 is back: its copy may go once m3 is available; the placement stays on m3 (sticky).
	back, _ := DecideFailover(p, ms, d, now, live(map[string]Liveness{"m1": up(), "m2": up(), "m3": up()}))
	if got := names(back.Chosen); !slices.Equal(got, []string{"m2", "m3"}) {
		t.Fatalf("after m1 returned chose %v, want [m2 m3] (sticky)", got)
	}
	if r := released(back); len(r) != 1 || r[0].Lost || r[0].Note.Reason != api.LostClusterReturnedReason {
		t.Fatalf("released = %+v, want m1 returned", r)
	}
}

func TestFailoverNeverOnASilenceShorterThanTheGracePeriod(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"), cluster("m3"))
	p := policy(t, "placementType: PickN\nnumberOfClusters: 2")
	first := Decide(p, ms, nil, now)
	// 1.5 periods (15s) + 30s grace: lost after 45s of silence.
	for _, tt := range []struct {
		silence time.Duration
		moves   bool
	}{{40 * time.Second, false}, {46 * time.Second, true}} {
		d, _ := DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": silent(tt.silence), "m2": up()}))
		if moved := slices.Contains(names(d.Chosen), "m3"); moved != tt.moves {
			t.Errorf("silent for %s: moved %v, want %v", tt.silence, moved, tt.moves)
		}
	}
	// A member the decision has no liveness for is never lost.
	d, _ := DecideFailover(p, ms, first, now.Add(time.Hour), live(map[string]Liveness{}))
	if d.Changed(first) {
		t.Errorf("a member with unknown liveness was failed over: %v", names(d.Chosen))
	}
}

// TestFailoverFirstDecisionSetsATimer: a placement's first decision has no liveness to
// judge, so it asks to be decided again at once; that decision, with a previous one,
// sets the timer for when a chosen member that falls silent would be lost.
func TestFailoverFirstDecisionSetsATimer(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"), cluster("m3"))
	p := policy(t, "placementType: PickN\nnumberOfClusters: 2")
	first, wake := DecideFailover(p, ms, nil, now, live(nil))
	if !wake.Equal(now) {
		t.Fatalf("first decision's timer at %v, want now (%v)", wake, now)
	}
	_, wake = DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": up(), "m2": up()}))
	// up()'s last heartbeat was 1s ago, period 10s: silent at +14s, lost 30s later.
	if want := now.Add(44 * time.Second); !wake.Equal(want) {
		t.Errorf("second decision's timer at %v, want %v", wake, want)
	}
}

// TestFailoverJudgesSilenceAsOfWhatItHeard: a decider behind its events (HeardUpTo
// earlier than now) does not take heartbeats it has yet to read for silence.
func TestFailoverJudgesSilenceAsOfWhatItHeard(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"), cluster("m3"))
	p := policy(t, "placementType: PickN\nnumberOfClusters: 2")
	first := Decide(p, ms, nil, now)
	// m1's last heartbeat read is 50s old: lost by now (1.5 periods + 30s grace = 45s)...
	fo := live(map[string]Liveness{"m1": silent(50 * time.Second), "m2": up()})
	if d, _ := DecideFailover(p, ms, first, now, fo); !slices.Contains(names(d.Chosen), "m3") {
		t.Fatalf("a member silent for 50s was not failed over: %v", names(d.Chosen))
	}
	// ...but not when the decider has heard the fleet only up to 10s after it.
	fo.HeardUpTo = now.Add(-40 * time.Second)
	d, wake := DecideFailover(p, ms, first, now, fo)
	if d.Changed(first) {
		t.Errorf("a member silent only as far as the decider is behind was failed over: %v", names(d.Chosen))
	}
	if want := now.Add(-5 * time.Second); !wake.Equal(want) {
		t.Errorf("timer at %v, want %v (when m1 is lost as of what was heard)", wake, want)
	}
}

func TestFailoverFollowsThePolicy(t *testing.T) {
	// m3 is not in the affinity, m4 does not tolerate the taint: only m5 may replace.
	ms := members(t, cluster("m1", "env", "prod"), cluster("m2", "env", "prod"), cluster("m3", "env", "dev"),
		withTaint(cluster("m4", "env", "prod"), "gpu", "true"), cluster("m5", "env", "prod"))
	p := policy(t, `placementType: PickN
numberOfClusters: 2
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms:
      - labelSelector:
          matchLabels: {env: prod}`)
	first := Decide(p, ms, nil, now)
	d, _ := DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": unreachable(time.Minute), "m2": up()}))
	if got := names(d.Chosen); !slices.Equal(got, []string{"m2", "m5"}) {
		t.Fatalf("chose %v, want [m2 m5]", got)
	}
}

func TestFailoverWithoutAReplacementStays(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"))
	p := policy(t, "placementType: PickN\nnumberOfClusters: 2")
	first := Decide(p, ms, nil, now)
	d, _ := DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": unreachable(time.Minute), "m2": up()}))
	if got := names(d.Chosen); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("chose %v, want the lost m1 kept", got)
	}
	if note(d, "m1") != api.NoFailoverReplacementReason || len(d.Released) != 0 {
		t.Fatalf("m1's note = %q, released %+v", note(d, "m1"), d.Released)
	}
	back, _ := DecideFailover(p, ms, d, now, live(map[string]Liveness{"m1": up(), "m2": up()}))
	if note(back, "m1") != "" || len(back.Steps) != 1 || back.Steps[0].Kind != "returned" {
		t.Fatalf("after m1 returned: note %q, steps %+v", note(back, "m1"), back.Steps)
	}
}

func TestFailoverPickAllAndPickFixedWait(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"), cluster("m3"))
	for _, doc := range []string{"placementType: PickAll", "placementType: PickFixed\nclusterNames: [m1, m2]"} {
		p := policy(t, doc)
		first := Decide(p, ms, nil, now)
		d, _ := DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": unreachable(time.Minute), "m2": up(), "m3": up()}))
		if !slices.Equal(names(d.Chosen), names(first.Chosen)) || note(d, "m1") != api.ClusterLostReason {
			t.Errorf("%s: chose %v (was %v), m1's note %q", doc, names(d.Chosen), names(first.Chosen), note(d, "m1"))
		}
	}
}

func TestFailbackReturnsAfterTheOriginalIsHealthyLongEnough(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"), cluster("m3"))
	p := policy(t, "placementType: PickN\nnumberOfClusters: 2")
	first := Decide(p, ms, nil, now)
	fo := FailoverPolicy{After: grace, FailbackAfter: time.Minute}
	fo.Live = map[string]Liveness{"m1": unreachable(time.Minute), "m2": up()}
	moved, _ := DecideFailover(p, ms, first, now, fo)
	if len(moved.Moves) != 1 || moved.Moves[0].From != "m1" || moved.Moves[0].To != "m3" {
		t.Fatalf("moves = %+v", moved.Moves)
	}

	// Back for 20s: not yet; the decision wakes when the minute is up.
	recent := up()
	recent.Since = now.Add(-20 * time.Second)
	fo.Live = map[string]Liveness{"m1": recent, "m2": up(), "m3": up()}
	d, wake := DecideFailover(p, ms, moved, now, fo)
	if got := names(d.Chosen); !slices.Equal(got, []string{"m2", "m3"}) || !wake.Equal(now.Add(40*time.Second)) {
		t.Fatalf("healthy for 20s: chose %v, wake %v", got, wake)
	}

	// Healthy for the failback period: m1 is added again, m3 released make-before-break.
	fo.Live["m1"] = up()
	back, _ := DecideFailover(p, ms, d, now, fo)
	if got := names(back.Chosen); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("after failback chose %v, want [m1 m2]", got)
	}
	if note(back, "m1") != api.FailbackScheduledReason || back.Chosen[0].Action != Added {
		t.Errorf("m1: note %q, action %s", note(back, "m1"), back.Chosen[0].Action)
	}
	if r := released(back); len(r) != 1 || r[0].Cluster != "m3" || r[0].Lost || r[0].Note.Reason != api.FailbackReleasedReason {
		t.Fatalf("released = %+v, want m3", r)
	}
	if len(back.Moves) != 0 || len(back.Steps) != 1 || back.Steps[0].Kind != "failback" {
		t.Fatalf("moves %+v, steps %+v", back.Moves, back.Steps)
	}
}

func TestFailbackIsOffByDefault(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"), cluster("m3"))
	p := policy(t, "placementType: PickN\nnumberOfClusters: 2")
	first := Decide(p, ms, nil, now)
	moved, _ := DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": unreachable(time.Minute), "m2": up()}))
	later, _ := DecideFailover(p, ms, moved, now, live(map[string]Liveness{"m1": up(), "m2": up(), "m3": up()}))
	if got := names(later.Chosen); !slices.Equal(got, []string{"m2", "m3"}) {
		t.Fatalf("with failback off chose %v, want [m2 m3] (sticky)", got)
	}
}

// BenchmarkDecideFailover re-decides the benchPickN placement (100 clusters) when
// 10 of its clusters are lost: replacements are picked under its affinity and
// spread constraints, in fleets of 1,000 and 5,000 members.
func BenchmarkDecideFailover(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			fleet := benchFleet(b, n)
			p := policy(b, benchPickN)
			prev := Decide(p, fleet, nil, now)
			fo := FailoverPolicy{After: grace, Live: map[string]Liveness{}}
			for i, c := range prev.Chosen {
				fo.Live[c.Cluster] = up()
				if i%10 == 0 {
					fo.Live[c.Cluster] = unreachable(time.Minute)
				}
			}
			d, _ := DecideFailover(p, fleet, prev, now, fo)
			if len(d.Moves) == 0 {
				b.Fatalf("no failover: %d chosen, %d released", len(d.Chosen), len(d.Released))
			}
			b.ReportMetric(float64(len(d.Moves)), "moved")
			b.ResetTimer()
			b.ReportAllocs()
			for b.Loop() {
				DecideFailover(p, fleet, prev, now, fo)
			}
		})
	}
}

// A member lost and replaced is never picked again as the replacement of another lost
// member while it is still down, though it may still count as eligible for the
// plain filters (which allow a member more missed heartbeats than failover does).
func TestFailoverNeverReplacesWithAMemberStillDown(t *testing.T) {
	ms := members(t, cluster("m1"), cluster("m2"), cluster("m3"), cluster("m4"))
	p := policy(t, "placementType: PickN\nnumberOfClusters: 2")
	first := Decide(p, ms, nil, now)
	if got := names(first.Chosen); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("first decision chose %v", got)
	}
	d, _ := DecideFailover(p, ms, first, now, live(map[string]Liveness{"m1": silent(time.Minute), "m2": up()}))
	if got := names(d.Chosen); !slices.Equal(got, []string{"m2", "m3"}) {
		t.Fatalf("m1 lost: chose %v, want [m2 m3]", got)
	}
	// Now m2 is lost too, m1 still silent.
	d2, _ := DecideFailover(p, ms, d, now.Add(time.Second), live(map[string]Liveness{
		"m1": silent(time.Minute + time.Second), "m2": unreachable(time.Minute), "m3": up()}))
	if got := names(d2.Chosen); !slices.Equal(got, []string{"m3", "m4"}) {
		t.Fatalf("m2 lost with m1 still down: chose %v, want [m3 m4]", got)
	}
}

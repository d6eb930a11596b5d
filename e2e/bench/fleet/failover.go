package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/e2e/bench/fleet/sim"
	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// failoverScenario (-failover alone, or in the suite): -failover-placements PickN -pick
// placements that fail over after -failover-grace and one that also fails back after
// -failback-after; once they are Available, -failover-lost of the members they are on go
// down, half silent (no heartbeat) and half saying their API server is unreachable. It
// measures the time from the loss until every placement is Available on -pick clusters
// none of which is lost (net of the grace period too: what is left is detection, the
// decision and the replacements' applies); then the members come back, and the time
// until their copies are gone (status and the members' own objects), and until the
// failback placement is Available where it was first, the replacements' copies gone.
func (s *suite) failoverScenario(ctx context.Context) error {
	o := s.o
	grace, back := o.failoverGrace.String(), o.failbackAfter.String()
	var specs []placementSpec
	for i := range o.failoverPlacements {
		name := fmt.Sprintf("failover-%02d", i+1)
		specs = append(specs, placementSpec{name: name, namespace: name, pick: o.pick, objects: 2, failoverAfter: grace})
	}
	fb := placementSpec{name: "failback", namespace: "failback", pick: o.pick, objects: 2, failoverAfter: grace, failbackAfter: back}
	specs = append(specs, fb)
	fmt.Fprintf(s.progress, "failover: %d placements, PickN %d each, failover after %s (and one failing back after %s)\n", len(specs), o.pick, grace, back)
	first := map[string][]string{} // each placement's clusters before the loss
	for _, p := range specs {
		if _, err := s.placeAndWaitEvery(ctx, p, o.pick, time.Second); err != nil {
			return err
		}
		crp, err := s.q.Placement(ctx, p.name)
		if err != nil {
			return err
		}
		first[p.name] = scheduledOn(crp)
	}
	lost := mostPlaced(first, o.failoverLost)
	silent, unreachable := lost[:len(lost)/2], lost[len(lost)/2:]
	hit := 0
	for _, cs := range first {
		for _, c := range cs {
			if slices.Contains(lost, c) {
				hit++
			}
		}
	}

	lostAt := time.Now()
	if err := s.b.fleet.Down(silent, sim.Silent); err != nil {
		return err
	}
	if err := s.b.fleet.Down(unreachable, sim.Unreachable); err != nil {
		return err
	}
	fmt.Fprintf(s.progress, "%d members down (%d silent, %d unreachable), %d copies of the placements on them\n", len(lost), len(silent), len(unreachable), hit)
	var slowest time.Duration
	for _, p := range specs {
		d, err := s.waitStatus(ctx, p.name, "to fail over from the lost members", lost, lostAt, func(crp *api.ClusterResourcePlacement) bool {
			return availableOn(crp, o.pick, func(c string) bool { return !slices.Contains(lost, c) })
		})
		if err != nil {
			return err
		}
		slowest = max(slowest, d)
	}
	s.add(row{scenario: fmt.Sprintf("failover: %d of %s members lost (%d copies, %d placements of PickN %d), to replacements Available",
		len(lost), count(o.members), hit, len(specs), o.pick),
		ours: fmt.Sprintf("%s (%s net of the %s grace)", dur(slowest), dur(slowest-o.failoverGrace), grace), kubefleet: "no failover", ratio: "-", goal: "-"})
	afterFailover := map[string][]string{}
	for _, p := range specs {
		crp, err := s.q.Placement(ctx, p.name)
		if err != nil {
			return err
		}
		afterFailover[p.name] = scheduledOn(crp)
	}

	backAt := time.Now()
	if err := s.b.fleet.Recover(lost); err != nil {
		return err
	}
	fmt.Fprintf(s.progress, "the %d members are back\n", len(lost))
	slowest = 0
	for _, p := range specs[:len(specs)-1] {
		d, err := s.waitStatus(ctx, p.name, "to drop the returned members' copies", lost, backAt, func(crp *api.ClusterResourcePlacement) bool {
			return availableOn(crp, o.pick, func(c string) bool { return !slices.Contains(lost, c) }) &&
				!inStatus(crp, lost) && !s.anyHolds(lost, p.name)
		})
		if err != nil {
			return err
		}
		slowest = max(slowest, d)
	}
	s.add(row{scenario: "  members back to their copies removed (status and members), failback off",
		ours: dur(slowest), kubefleet: "-", goal: "-"})

	replacements := without(afterFailover[fb.name], first[fb.name])
	d, err := s.waitStatus(ctx, fb.name, "to fail back", replacements, backAt, func(crp *api.ClusterResourcePlacement) bool {
		return slices.Equal(scheduledOn(crp), first[fb.name]) && availableOn(crp, o.pick, func(string) bool { return true }) &&
			!inStatus(crp, replacements) && !s.anyHolds(replacements, fb.name)
	})
	if err != nil {
		return err
	}
	s.add(row{scenario: fmt.Sprintf("  failback (after %s): members back to Available there again, replacements' copies removed", back),
		ours: fmt.Sprintf("%s (%s net of the %s)", dur(d), dur(d-o.failbackAfter), back), kubefleet: "-", goal: "-"})
	if err := s.mistakenLosses(ctx, specs, lost, time.Time{}, "  members found lost that never went down (heartbeats taken in late) / copies moved off them"); err != nil {
		return err
	}
	return s.schedulerPause(ctx, specs)
}

// schedulerPause stops the scheduler (SIGSTOP) for -failover-pause, as a long pause or a
// starved machine would, while every member beats on, and counts the members found lost
// once it resumes: none went down, but their heartbeats wait in its consumer.
func (s *suite) schedulerPause(ctx context.Context, specs []placementSpec) error {
	o := s.o
	if o.failoverPause <= 0 {
		return nil
	}
	p := s.services["scheduler"]
	fmt.Fprintf(s.progress, "pausing the scheduler for %s, every member beating\n", o.failoverPause)
	at := time.Now()
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(o.failoverPause):
	}
	if err := p.signal(syscall.SIGCONT); err != nil {
		return err
	}
	seq := s.b.fleet.Stats().LastSeq
	if err := s.b.waitEvery(ctx, "the scheduler to take in the heartbeats of its pause", time.Second, func() bool {
		return s.b.caughtUp(ctx, seq, bus.ConsumerScheduler)
	}, func() string { return s.b.consumerProgress(ctx, seq) }); err != nil {
		return err
	}
	caughtUp := time.Since(at) - o.failoverPause
	// The timers run every second: a few more, then look.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
	}
	return s.mistakenLosses(ctx, specs, nil, at, fmt.Sprintf("  scheduler paused %s, no member down: members found lost / copies moved (caught up %s after)", o.failoverPause, dur(caughtUp)))
}

// mistakenLosses adds a row of the members the placements' histories say were lost (since
// then) that never went down: their heartbeats reached the scheduler's PostgreSQL rows more than 1.5
// periods apart (a hub behind on heartbeats, or a fleet that could not publish them).
func (s *suite) mistakenLosses(ctx context.Context, specs []placementSpec, lost []string, since time.Time, scenario string) error {
	wrongly, moved := map[string]bool{}, 0
	for _, p := range specs {
		h, err := s.q.History(ctx, events.HistoryQuery{Name: p.name})
		if err != nil {
			return err
		}
		for _, f := range h.Failovers {
			if (f.Kind == "lost" || f.Kind == "failover") && !slices.Contains(lost, f.From) && !f.At.Before(since) {
				wrongly[f.From] = true
				if f.Kind == "failover" {
					moved++
				}
			}
		}
	}
	s.add(row{scenario: scenario,
		ours: fmt.Sprintf("%d / %d", len(wrongly), moved), kubefleet: "-", goal: "0"})
	return nil
}

// waitStatus polls the placement's status every second until done, returning the time
// since from; its progress says which of the watched clusters the placement is scheduled on.
func (s *suite) waitStatus(ctx context.Context, name, what string, watch []string, from time.Time, done func(*api.ClusterResourcePlacement) bool) (time.Duration, error) {
	var last string
	err := s.b.waitEvery(ctx, name+" "+what, time.Second, func() bool {
		qctx, cancel := context.WithTimeout(ctx, time.Minute)
		crp, err := s.q.Placement(qctx, name)
		cancel()
		if err != nil {
			last = err.Error()
			return false
		}
		last = s.b.consumerProgress(ctx, s.b.fleet.Stats().LastSeq) + "; " + summarize(crp, s.o.pick) + "; scheduled on " + strings.Join(watch, " ") + ": " + fmt.Sprint(slices.DeleteFunc(scheduledOn(crp), func(c string) bool { return !slices.Contains(watch, c) }))
		return done(crp)
	}, func() string { return last })
	if err != nil {
		return 0, err
	}
	return time.Since(from), nil
}

// anyHolds: one of the members holds the placement's objects.
func (s *suite) anyHolds(members []string, placement string) bool {
	return slices.ContainsFunc(members, func(m string) bool { return s.b.fleet.Holds(m, placement) })
}

// availableOn: the placement is Applied and Available, on want clusters that are
// scheduled and pass ok, for its generation.
func availableOn(crp *api.ClusterResourcePlacement, want int, ok func(string) bool) bool {
	if !placementCondition(crp, api.ClusterResourcePlacementAppliedConditionType) ||
		!placementCondition(crp, api.ClusterResourcePlacementAvailableConditionType) {
		return false
	}
	n := 0
	for _, ps := range crp.Status.PlacementStatuses {
		if ok(ps.ClusterName) && condition(ps.Conditions, string(api.PerClusterScheduledConditionType)) &&
			condition(ps.Conditions, string(api.PerClusterAppliedConditionType)) &&
			condition(ps.Conditions, string(api.PerClusterAvailableConditionType)) {
			n++
		}
	}
	return n == want && len(scheduledOn(crp)) == want
}

// scheduledOn are the clusters the placement's status says it is scheduled on, sorted.
func scheduledOn(crp *api.ClusterResourcePlacement) []string {
	var out []string
	for _, ps := range crp.Status.PlacementStatuses {
		if condition(ps.Conditions, string(api.PerClusterScheduledConditionType)) {
			out = append(out, ps.ClusterName)
		}
	}
	slices.Sort(out)
	return out
}

// inStatus: the placement's status says one of the clusters holds a copy (scheduled, or
// applied). A released cluster keeps an entry with its Failover condition alone.
func inStatus(crp *api.ClusterResourcePlacement, clusters []string) bool {
	return slices.ContainsFunc(crp.Status.PlacementStatuses, func(ps api.ResourcePlacementStatus) bool {
		return slices.Contains(clusters, ps.ClusterName) &&
			(condition(ps.Conditions, string(api.PerClusterScheduledConditionType)) || condition(ps.Conditions, string(api.PerClusterAppliedConditionType)))
	})
}

// mostPlaced are the n clusters the most placements are on (then by name).
func mostPlaced(placed map[string][]string, n int) []string {
	counts := map[string]int{}
	for _, cs := range placed {
		for _, c := range cs {
			counts[c]++
		}
	}
	var all []string
	for c := range counts {
		all = append(all, c)
	}
	slices.SortFunc(all, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	return all[:min(n, len(all))]
}

// without is a less b.
func without(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(c string) bool { return slices.Contains(b, c) })
}

// failoverAnnotations is the metadata of a placement with the failover annotations set.
func failoverAnnotations(after, back string) string {
	var b strings.Builder
	if after == "" && back == "" {
		return ""
	}
	b.WriteString("  annotations:\n")
	if after != "" {
		fmt.Fprintf(&b, "    %s: %q\n", api.FailoverAfterAnnotation, after)
	}
	if back != "" {
		fmt.Fprintf(&b, "    %s: %q\n", api.FailbackAfterAnnotation, back)
	}
	return b.String()
}

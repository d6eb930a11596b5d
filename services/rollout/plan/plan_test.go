package plan_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/services/rollout/plan"
)

// fleet returns n scheduled clusters m1..mn holding the old work, all ready.
func fleet(n int) []plan.Cluster {
	var cs []plan.Cluster
	for i := 1; i <= n; i++ {
		cs = append(cs, plan.Cluster{Name: fmt.Sprintf("m%d", i), Scheduled: true, Holds: true, Ready: true})
	}
	return cs
}

func with(cs []plan.Cluster, name string, f func(*plan.Cluster)) []plan.Cluster {
	cs = slices.Clone(cs)
	for i := range cs {
		if cs[i].Name == name {
			f(&cs[i])
			return cs
		}
	}
	c := plan.Cluster{Name: name}
	f(&c)
	return append(cs, c)
}

func pct(s string) intstr.IntOrString { return intstr.FromString(s) }
func num(n int) intstr.IntOrString    { return intstr.FromInt32(int32(n)) }

func strategy(maxUnavailable, maxSurge intstr.IntOrString) plan.Strategy {
	return plan.Strategy{MaxUnavailable: maxUnavailable, MaxSurge: maxSurge}
}

func TestDecide(t *testing.T) {
	defaults := strategy(pct("25%"), pct("25%"))
	tests := []struct {
		name    string
		in      plan.Input
		update  []string
		add     []string
		remove  []string
		waiting map[string]string // cluster -> substring of the reason
		unavail int
		surge   int
	}{{
		name:    "25% of 4 rounds up to 1: one cluster at a time",
		in:      plan.Input{Target: 4, Strategy: defaults, Clusters: fleet(4)},
		update:  []string{"m1"},
		waiting: map[string]string{"m2": "waiting for m1 to become available (maxUnavailable 1 of 4 cluster(s))", "m3": "m1", "m4": "m1"},
		unavail: 1, surge: 1,
	}, {
		name:    "25% of 5 rounds up to 2",
		in:      plan.Input{Target: 5, Strategy: defaults, Clusters: fleet(5)},
		update:  []string{"m1", "m2"},
		waiting: map[string]string{"m3": "waiting for m1, m2 to become available (maxUnavailable 2 of 5 cluster(s))", "m4": "", "m5": ""},
		unavail: 2, surge: 2,
	}, {
		name:    "100%: everything at once",
		in:      plan.Input{Target: 4, Strategy: strategy(pct("100%"), pct("25%")), Clusters: fleet(4)},
		update:  []string{"m1", "m2", "m3", "m4"},
		unavail: 4, surge: 1,
	}, {
		name:    "an integer maxUnavailable",
		in:      plan.Input{Target: 5, Strategy: strategy(num(3), num(0)), Clusters: fleet(5)},
		update:  []string{"m1", "m2", "m3"},
		waiting: map[string]string{"m4": "maxUnavailable 3 of 5", "m5": ""},
		unavail: 3, surge: 0,
	}, {
		name: "the budget counts clusters that are unavailable already",
		in: plan.Input{Target: 4, Strategy: strategy(num(2), num(1)),
			Clusters: with(with(fleet(4), "m1", func(c *plan.Cluster) { c.Current, c.Ready = true, false }), "m2", func(c *plan.Cluster) { c.Current = true })},
		update:  []string{"m3"},
		waiting: map[string]string{"m4": "waiting for m1, m3 to become available"},
		unavail: 2, surge: 1,
	}, {
		name: "failed clusters are updated without waiting for budget",
		in: plan.Input{Target: 4, Strategy: defaults,
			Clusters: with(with(fleet(4), "m2", func(c *plan.Cluster) { c.Ready, c.Failed = false, true }), "m4", func(c *plan.Cluster) { c.Ready, c.Failed = false, true })},
		// m2 and m4 have failed: two unavailable already, so no ready one
		// may go down, but the failed ones are updated at once.
		update:  []string{"m2", "m4"},
		waiting: map[string]string{"m1": "waiting for m2, m4 to become available", "m3": ""},
		unavail: 1, surge: 1,
	}, {
		name:    "maxUnavailable 0 never updates in place, and says so",
		in:      plan.Input{Target: 2, Strategy: strategy(num(0), num(1)), Clusters: fleet(2)},
		waiting: map[string]string{"m1": "maxUnavailable is 0 of 2 cluster(s)", "m2": "set maxUnavailable above 0"},
		unavail: 0, surge: 1,
	}, {
		name: "a first rollout adds every scheduled cluster: they were not available anyway",
		in: plan.Input{Target: 3, Strategy: defaults, Clusters: []plan.Cluster{
			{Name: "m1", Scheduled: true}, {Name: "m2", Scheduled: true}, {Name: "m3", Scheduled: true}}},
		add:     []string{"m1", "m2", "m3"},
		unavail: 1, surge: 1,
	}, {
		name: "maxSurge bounds the clusters holding the placement while it moves",
		in: plan.Input{Target: 2, Strategy: strategy(num(0), num(1)), Clusters: []plan.Cluster{
			{Name: "old1", Holds: true, Current: true, Ready: true},
			{Name: "old2", Holds: true, Current: true, Ready: true},
			{Name: "new1", Scheduled: true}, {Name: "new2", Scheduled: true}}},
		// maxUnavailable 0: the old clusters stay until new ones are ready;
		// maxSurge 1: 2 + 1 clusters may hold it, and 2 do.
		add: []string{"new1"},
		waiting: map[string]string{
			"old1": "removal waits", "old2": "removal waits",
			"new2": "maxSurge 1 allows at most 3 cluster(s) to hold the placement and 3 do",
		},
		unavail: 0, surge: 1,
	}, {
		name: "a removed cluster that is not available is removed at once, freeing a surge slot",
		in: plan.Input{Target: 1, Strategy: strategy(num(0), num(0)), Clusters: []plan.Cluster{
			{Name: "old", Holds: true, Current: true, Failed: true},
			{Name: "new", Scheduled: true}}},
		remove: []string{"old"}, add: []string{"new"},
		unavail: 0, surge: 0,
	}, {
		name: "a ready cluster being removed still counts as available",
		in: plan.Input{Target: 3, Strategy: defaults, Clusters: append(fleet(3),
			plan.Cluster{Name: "gone-soon", Holds: true, Ready: true})},
		// 4 available, at least 3-1 must stay: two may go down.
		remove: []string{"gone-soon"}, update: []string{"m1"},
		waiting: map[string]string{"m2": "waiting for m1 to become available (maxUnavailable 1 of 3", "m3": "m1"},
		unavail: 1, surge: 1,
	}, {
		name: "a removal takes budget like an update",
		in: plan.Input{Target: 3, Strategy: strategy(num(0), num(1)), Clusters: append(fleet(3),
			plan.Cluster{Name: "gone-soon", Holds: true, Ready: true})},
		// 4 available, all 3 must stay: the one spare goes to the removal.
		remove:  []string{"gone-soon"},
		waiting: map[string]string{"m1": "maxUnavailable is 0", "m2": "", "m3": ""},
		unavail: 0, surge: 1,
	}, {
		name: "a member that left is removed whatever the budget",
		in: plan.Input{Target: 2, Strategy: strategy(num(0), num(0)), Clusters: []plan.Cluster{
			{Name: "m1", Scheduled: true, Holds: true, Current: true, Ready: true},
			{Name: "m2", Scheduled: true, Holds: true, Current: true, Ready: true},
			{Name: "left", Holds: true, Current: true, Ready: true, Gone: true}}},
		remove:  []string{"left"},
		unavail: 0, surge: 0,
	}, {
		name: "a PickN target the scheduler could not fill still updates the clusters it has",
		in:   plan.Input{Target: 3, Strategy: defaults, Clusters: fleet(2)},
		// maxUnavailable ceil(0.75) = 1 of 3; two clusters exist, so one
		// may go down.
		update:  []string{"m1"},
		waiting: map[string]string{"m2": "waiting for m1"},
		unavail: 1, surge: 1,
	}, {
		name: "External rolls out nothing, but removes what is no longer scheduled",
		in: plan.Input{Target: 2, Strategy: plan.Strategy{External: true}, Clusters: append(fleet(1),
			plan.Cluster{Name: "m2", Scheduled: true}, plan.Cluster{Name: "old", Holds: true, Ready: false})},
		remove:  []string{"old"},
		waiting: map[string]string{"m1": "External", "m2": "External"},
	}, {
		name: "External updates and adds the clusters a staged run released, regardless of budget",
		in: plan.Input{Target: 3, Strategy: plan.Strategy{External: true, Released: map[string]bool{"m1": true, "m3": true}},
			Clusters: append(fleet(2), plan.Cluster{Name: "m3", Scheduled: true})},
		update:  []string{"m1"},
		add:     []string{"m3"},
		waiting: map[string]string{"m2": "External"},
	}, {
		name:    "clusters holding the current work need nothing",
		in:      plan.Input{Target: 2, Strategy: defaults, Clusters: with(with(fleet(2), "m1", func(c *plan.Cluster) { c.Current = true }), "m2", func(c *plan.Cluster) { c.Current, c.Ready = true, false })},
		unavail: 1, surge: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := plan.Decide(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, want []string) {
				t.Helper()
				if !slices.Equal(got, want) {
					t.Errorf("%s %v, want %v", what, got, want)
				}
			}
			check("update", p.Update, tt.update)
			check("add", p.Add, tt.add)
			check("remove", p.Remove, tt.remove)
			if len(p.Waiting) != len(tt.waiting) {
				t.Errorf("waiting %v, want clusters %v", p.Waiting, tt.waiting)
			}
			for name, want := range tt.waiting {
				got, ok := p.Waiting[name]
				if !ok || !strings.Contains(got, want) {
					t.Errorf("%s waits for %q, want it to contain %q", name, got, want)
				}
			}
			if p.MaxUnavailable != tt.unavail || p.MaxSurge != tt.surge {
				t.Errorf("maxUnavailable %d, maxSurge %d; want %d, %d", p.MaxUnavailable, p.MaxSurge, tt.unavail, tt.surge)
			}
		})
	}
}

// TestRollingUpdateToTheEnd steps a rollout across 8 clusters with
// maxUnavailable 25% (2): each step updates what the budget allows, then the
// updated clusters report ready; it takes 4 steps and never has more than 2
// clusters unavailable.
func TestRollingUpdateToTheEnd(t *testing.T) {
	cs := fleet(8)
	for step := 1; ; step++ {
		p, err := plan.Decide(plan.Input{Target: 8, Strategy: strategy(pct("25%"), pct("25%")), Clusters: cs})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Update) == 0 {
			if step != 5 {
				t.Errorf("finished after %d steps, want 4", step-1)
			}
			break
		}
		if len(p.Update) > 2 {
			t.Fatalf("step %d updates %v: more than maxUnavailable", step, p.Update)
		}
		for _, n := range p.Update {
			cs = with(cs, n, func(c *plan.Cluster) { c.Current, c.Ready = true, false })
		}
		unavailable := 0
		for _, c := range cs {
			if !c.Ready {
				unavailable++
			}
		}
		if unavailable > 2 {
			t.Fatalf("step %d: %d clusters unavailable", step, unavailable)
		}
		for _, n := range p.Update {
			cs = with(cs, n, func(c *plan.Cluster) { c.Ready = true })
		}
	}
	for _, c := range cs {
		if !c.Current {
			t.Errorf("%s was never updated", c.Name)
		}
	}
}

func TestReadiness(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	applied := plan.Condition{Status: "True", Reason: "ApplySucceeded"}
	available := plan.Condition{Status: "True", Reason: "ResourceAvailable"}
	notYet := plan.Condition{Status: "False", Reason: "ResourceNotAvailableYet", Message: "1 of 2 manifest(s) are not available yet"}
	tests := []struct {
		name       string
		report     *plan.Report
		reportDiff bool
		now        time.Time
		want       plan.State
	}{
		{name: "no report", want: plan.State{Why: "no apply result has been reported yet"}},
		{name: "applied and available", report: &plan.Report{Applied: applied, Available: available}, now: t0, want: plan.State{Ready: true}},
		{name: "apply failed", report: &plan.Report{Applied: plan.Condition{Status: "False", Message: "Failed to apply 1 of 1 manifest(s)"}},
			want: plan.State{Failed: true, Why: "apply failed: Failed to apply 1 of 1 manifest(s)"}},
		{name: "apply pending", report: &plan.Report{Applied: plan.Condition{Status: "Unknown"}}, want: plan.State{Why: "the apply is pending"}},
		{name: "trackable object not available", report: &plan.Report{Applied: applied, Available: notYet}, now: t0,
			want: plan.State{Why: "not available yet: 1 of 2 manifest(s) are not available yet"}},
		{name: "not-trackable objects wait out the unavailable period", now: t0.Add(59 * time.Second),
			report: &plan.Report{Applied: applied, Available: notYet, NotTrackable: true, OnlyNotTrackablePending: true},
			want: plan.State{ReadyAt: t0.Add(time.Minute),
				Why: "objects whose availability cannot be tracked count as available 1m0s after they are applied (at 2026-01-01T12:01:00Z)"}},
		{name: "and are ready when it is over", now: t0.Add(time.Minute),
			report: &plan.Report{Applied: applied, Available: notYet, NotTrackable: true, OnlyNotTrackablePending: true},
			want:   plan.State{Ready: true}},
		{name: "a worker that calls them available at once still waits", now: t0.Add(10 * time.Second),
			report: &plan.Report{Applied: applied, Available: available, NotTrackable: true},
			want: plan.State{ReadyAt: t0.Add(time.Minute),
				Why: "objects whose availability cannot be tracked count as available 1m0s after they are applied (at 2026-01-01T12:01:00Z)"}},
		{name: "a trackable object still pending is not excused by the period", now: t0.Add(2 * time.Minute),
			report: &plan.Report{Applied: applied, Available: notYet, NotTrackable: true},
			want:   plan.State{Why: "not available yet: 1 of 2 manifest(s) are not available yet"}},
		{name: "ReportDiff is ready when the diff is reported", reportDiff: true,
			report: &plan.Report{DiffReported: &plan.Condition{Status: "True"}}, want: plan.State{Ready: true}},
		{name: "ReportDiff fails when diff reporting fails", reportDiff: true,
			report: &plan.Report{DiffReported: &plan.Condition{Status: "False", Message: "Diff reporting failed for 1 of 1 manifest(s)"}},
			want:   plan.State{Failed: true, Why: "diff reporting failed: Diff reporting failed for 1 of 1 manifest(s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan.Readiness(tt.report, tt.reportDiff, t0, time.Minute, tt.now)
			if got != tt.want {
				t.Errorf("Readiness = %+v\nwant        %+v", got, tt.want)
			}
		})
	}
}

func TestDecideRejectsBadPercentages(t *testing.T) {
	_, err := plan.Decide(plan.Input{Target: 2, Strategy: strategy(pct("lots"), pct("25%")), Clusters: fleet(2)})
	if err == nil || !strings.Contains(err.Error(), "maxUnavailable") {
		t.Errorf("Decide with maxUnavailable \"lots\" returned %v, want an error naming maxUnavailable", err)
	}
}

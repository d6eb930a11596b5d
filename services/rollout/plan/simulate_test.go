package plan_test

import (
	"reflect"
	"testing"

	"github.com/flotilla-dev/flotilla/services/rollout/plan"
)

func TestSimulateBatches(t *testing.T) {
	fresh := func(names ...string) []plan.Cluster {
		var cs []plan.Cluster
		for _, n := range names {
			cs = append(cs, plan.Cluster{Name: n, Scheduled: true})
		}
		return cs
	}
	tests := []struct {
		name     string
		in       plan.Input
		want     []plan.Step
		waitsFor []string
	}{{
		name: "a new placement goes everywhere at once: additions only count against maxSurge above the target",
		in:   plan.Input{Target: 3, Strategy: strategy(pct("25%"), pct("25%")), Clusters: fresh("m1", "m2", "m3")},
		want: []plan.Step{{Add: []string{"m1", "m2", "m3"}}},
	}, {
		name: "an update of 4 holders with maxUnavailable 1 goes one cluster a batch",
		in:   plan.Input{Target: 4, Strategy: strategy(num(1), num(0)), Clusters: fleet(4)},
		want: []plan.Step{{Update: []string{"m1"}}, {Update: []string{"m2"}}, {Update: []string{"m3"}}, {Update: []string{"m4"}}},
	}, {
		name: "maxUnavailable 50% of 4 updates two at a time",
		in:   plan.Input{Target: 4, Strategy: strategy(pct("50%"), num(0)), Clusters: fleet(4)},
		want: []plan.Step{{Update: []string{"m1", "m2"}}, {Update: []string{"m3", "m4"}}},
	}, {
		name: "a move: the new cluster is added within maxSurge, the old one removed once it is available",
		in: plan.Input{Target: 2, Strategy: strategy(num(0), num(1)),
			Clusters: with(with(fleet(2), "m2", func(c *plan.Cluster) { c.Scheduled = false; c.Current = true }),
				"m3", func(c *plan.Cluster) { c.Scheduled = true })},
		want: []plan.Step{{Update: nil, Add: []string{"m3"}}, {Remove: []string{"m2"}}},
		// m1 holds old work and maxUnavailable 0 never lets it update in place.
		waitsFor: []string{"m1"},
	}, {
		name:     "External: nothing rolls out, every cluster waits",
		in:       plan.Input{Target: 2, Strategy: plan.Strategy{External: true}, Clusters: fresh("m1", "m2")},
		waitsFor: []string{"m1", "m2"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, waiting, err := plan.Simulate(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(steps, tt.want) {
				t.Errorf("steps %+v, want %+v", steps, tt.want)
			}
			var waits []string
			for _, c := range []string{"m1", "m2", "m3", "m4"} {
				if _, ok := waiting[c]; ok {
					waits = append(waits, c)
				}
			}
			if !reflect.DeepEqual(waits, tt.waitsFor) {
				t.Errorf("waiting %v, want %v (%v)", waits, tt.waitsFor, waiting)
			}
		})
	}
}

func TestSimulateRefusesABadBound(t *testing.T) {
	if _, _, err := plan.Simulate(plan.Input{Target: 2, Strategy: strategy(pct("x%"), num(0)), Clusters: fleet(2)}); err == nil {
		t.Error("maxUnavailable x% was accepted")
	}
}

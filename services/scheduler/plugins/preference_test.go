package plugins

import (
	"testing"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

func TestPreferredAffinity(t *testing.T) {
	const nodes = "kubernetes-fleet.io/node-count"
	withNodes := func(s framework.MemberSpec, n string) framework.MemberSpec {
		s.Properties = map[string]string{nodes: n}
		return s
	}
	specs := []framework.MemberSpec{
		withNodes(spec("a", "critical-level", "1", "env", "prod"), "10"),
		withNodes(spec("b", "critical-level", "2"), "20"),
		withNodes(spec("c", "critical-level", "1", "env", "prod", "region", "west"), "30"),
		spec("d", "region", "west"),
	}
	desc := &framework.PropertySorter{Name: nodes, Order: framework.Descending}
	asc := &framework.PropertySorter{Name: nodes, Order: framework.Ascending}

	for _, tc := range []struct {
		name  string
		prefs []framework.Preference
		want  map[string]int32
	}{
		{"label match earns the weight", []framework.Preference{
			{Weight: 20, Term: framework.Term{Labels: selector(t, "critical-level=1")}},
		}, map[string]int32{"a": 20, "b": 0, "c": 20, "d": 0}},
		{"weights are summed, negative ones too", []framework.Preference{
			{Weight: 20, Term: framework.Term{Labels: selector(t, "critical-level=1")}},
			{Weight: 15, Term: framework.Term{Labels: selector(t, "env=prod")}},
			{Weight: -30, Term: framework.Term{Labels: selector(t, "region=west")}},
		}, map[string]int32{"a": 35, "b": 0, "c": 5, "d": -30}},
		{"descending sorter favours large values", []framework.Preference{{Weight: 50, Sorter: desc}},
			map[string]int32{"a": 0, "b": 25, "c": 50, "d": 0}},
		{"ascending sorter favours small values", []framework.Preference{{Weight: 50, Sorter: asc}},
			map[string]int32{"a": 50, "b": 25, "c": 0, "d": 0}},
		{"interpolation rounds", []framework.Preference{{Weight: 7, Sorter: desc}},
			map[string]int32{"a": 0, "b": 4, "c": 7, "d": 0}},
		{"a sorter applies only to members its selector matches", []framework.Preference{
			{Weight: 50, Sorter: desc, Term: framework.Term{Labels: selector(t, "env=prod")}},
		}, map[string]int32{"a": 0, "b": 0, "c": 50, "d": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, set := fleet(t, &framework.Policy{Type: framework.PickN, Preferred: tc.prefs}, specs...)
			sc := PreferredAffinity{}.Scorer(c, set.All())
			if sc == nil {
				t.Fatal("no scorer")
			}
			for name, want := range tc.want {
				if got := sc.Score(get(t, set, name)); got != want {
					t.Errorf("%s scored %d, want %d", name, got, want)
				}
			}
		})
	}
}

func TestPreferredAffinityEqualValuesScoreNothing(t *testing.T) {
	a, b := spec("a"), spec("b")
	a.Properties = map[string]string{"cpu": "4"}
	b.Properties = map[string]string{"cpu": "4000m"}
	p := &framework.Policy{Type: framework.PickN, Preferred: []framework.Preference{
		{Weight: 100, Sorter: &framework.PropertySorter{Name: "cpu", Order: framework.Descending}},
	}}
	c, set := fleet(t, p, a, b)
	sc := PreferredAffinity{}.Scorer(c, set.All())
	for _, m := range set.All() {
		if got := sc.Score(m); got != 0 {
			t.Errorf("%s scored %d, want 0", m.Name, got)
		}
	}
}

func TestPreferredAffinityIgnoredOutsidePickN(t *testing.T) {
	prefs := []framework.Preference{{Weight: 10, Term: framework.Term{Labels: selector(t, "x=y")}}}
	for _, typ := range []framework.PlacementType{framework.PickAll, framework.PickFixed} {
		c, set := fleet(t, &framework.Policy{Type: typ, Preferred: prefs}, spec("a", "x", "y"))
		if sc := (PreferredAffinity{}).Scorer(c, set.All()); sc != nil {
			t.Errorf("%s: a scorer was prepared", typ)
		}
	}
}

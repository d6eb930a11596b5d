package plugins

import (
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

func spreadPolicy(cons ...framework.SpreadConstraint) *framework.Policy {
	return &framework.Policy{Type: framework.PickN, NumberOfClusters: 3, Spread: cons}
}

func evaluate(t *testing.T, sp framework.Spreader, m *framework.Member) (framework.Reason, int32) {
	t.Helper()
	return sp.Evaluate(sp.Group(m))
}

func TestTopologySpreadGroupsMembersByDomains(t *testing.T) {
	c, set := fleet(t, spreadPolicy(
		framework.SpreadConstraint{MaxSkew: 1, TopologyKey: "region", WhenUnsatisfiable: framework.DoNotSchedule},
		framework.SpreadConstraint{MaxSkew: 1, TopologyKey: "day", WhenUnsatisfiable: framework.ScheduleAnyway},
	),
		spec("e-mon-1", "region", "east", "day", "mon"),
		spec("e-mon-2", "region", "east", "day", "mon"),
		spec("e-tue", "region", "east", "day", "tue"),
		spec("w-mon", "region", "west", "day", "mon"),
		spec("nowhere"),
	)
	sp := TopologySpread{}.Spreader(c, nil, set.All())
	if sp.Groups() != 4 {
		t.Errorf("groups = %d, want 4", sp.Groups())
	}
	g := func(name string) int { return sp.Group(get(t, set, name)) }
	if g("e-mon-1") != g("e-mon-2") {
		t.Error("members in the same domains are in different groups")
	}
	if g("e-mon-1") == g("e-tue") || g("e-mon-1") == g("w-mon") || g("nowhere") == g("w-mon") {
		t.Error("members in different domains share a group")
	}
}

func TestTopologySpreadDoNotSchedule(t *testing.T) {
	c, set := fleet(t, spreadPolicy(framework.SpreadConstraint{MaxSkew: 1, TopologyKey: "region", WhenUnsatisfiable: framework.DoNotSchedule}),
		spec("east-1", "region", "east"), spec("east-2", "region", "east"),
		spec("west-1", "region", "west"), spec("north-1", "region", "north"),
		spec("nowhere"),
	)
	sp := TopologySpread{}.Spreader(c, nil, set.All())
	east, west, nowhere := get(t, set, "east-1"), get(t, set, "west-1"), get(t, set, "nowhere")

	// Empty domains: any first pick raises the skew from 0 to 1.
	if r, s := evaluate(t, sp, east); r.Rejected() || s != -1 {
		t.Errorf("first pick = %+v %d, want allowed, -1", r, s)
	}
	sp.Place(sp.Group(east))
	r, _ := evaluate(t, sp, east)
	if r.Code != framework.ReasonTopologySpread || !strings.Contains(r.Message, `"region" (max skew 1)`) {
		t.Errorf("second pick in east = %+v, want a spread violation naming region", r)
	}
	// West evens out without changing the skew.
	if r, s := evaluate(t, sp, west); r.Rejected() || s != 0 {
		t.Errorf("west = %+v %d, want allowed, 0", r, s)
	}
	// A cluster without the key is outside the spread.
	if r, s := evaluate(t, sp, nowhere); r.Rejected() || s != 0 {
		t.Errorf("nowhere = %+v %d, want allowed, 0", r, s)
	}
	sp.Place(sp.Group(west))
	north := get(t, set, "north-1")
	// The last empty domain: filling it lowers the skew from 1 to 0.
	if r, s := evaluate(t, sp, north); r.Rejected() || s != 1 {
		t.Errorf("north = %+v %d, want allowed, +1", r, s)
	}
	sp.Place(sp.Group(north))
	if r, _ := evaluate(t, sp, east); r.Rejected() {
		t.Errorf("east after every domain holds one = %+v, want allowed", r)
	}

	// Unplace undoes Place.
	sp.Unplace(sp.Group(north))
	sp.Unplace(sp.Group(west))
	if r, _ := evaluate(t, sp, east); !r.Rejected() {
		t.Error("after unplacing, east should be full again")
	}
}

func TestTopologySpreadScheduleAnywayPenalises(t *testing.T) {
	c, set := fleet(t, spreadPolicy(framework.SpreadConstraint{MaxSkew: 1, TopologyKey: "day", WhenUnsatisfiable: framework.ScheduleAnyway}),
		spec("mon-1", "day", "mon"), spec("mon-2", "day", "mon"), spec("tue-1", "day", "tue"),
	)
	mon := get(t, set, "mon-1")
	sp := TopologySpread{}.Spreader(c, []*framework.Member{mon}, []*framework.Member{get(t, set, "mon-2"), get(t, set, "tue-1")})
	if r, s := evaluate(t, sp, get(t, set, "mon-2")); r.Rejected() || s != -ScheduleAnywayPenalty {
		t.Errorf("mon-2 = %+v %d, want allowed with the penalty", r, s)
	}
	if r, s := evaluate(t, sp, get(t, set, "tue-1")); r.Rejected() || s != 1 {
		t.Errorf("tue-1 = %+v %d, want allowed, +1", r, s)
	}
}

func TestTopologySpreadMaxSkewAllowsImbalance(t *testing.T) {
	c, set := fleet(t, spreadPolicy(framework.SpreadConstraint{MaxSkew: 2, TopologyKey: "region", WhenUnsatisfiable: framework.DoNotSchedule}),
		spec("e1", "region", "east"), spec("e2", "region", "east"), spec("e3", "region", "east"), spec("w1", "region", "west"),
	)
	e1, e2, e3 := get(t, set, "e1"), get(t, set, "e2"), get(t, set, "e3")
	sp := TopologySpread{}.Spreader(c, []*framework.Member{e1}, []*framework.Member{e2, e3, get(t, set, "w1")})
	if r, s := evaluate(t, sp, e2); r.Rejected() || s != -1 {
		t.Errorf("second in east = %+v %d, want allowed, -1 (skew 1 -> 2)", r, s)
	}
	sp.Place(sp.Group(e2))
	if r, _ := evaluate(t, sp, e3); !r.Rejected() {
		t.Error("third in east with west empty exceeds max skew 2")
	}
}

func TestTopologySpreadSingleDomainNeverSkews(t *testing.T) {
	c, set := fleet(t, spreadPolicy(framework.SpreadConstraint{MaxSkew: 1, TopologyKey: "region", WhenUnsatisfiable: framework.DoNotSchedule}),
		spec("a", "region", "east"), spec("b", "region", "east"))
	sp := TopologySpread{}.Spreader(c, nil, set.All())
	for range 2 {
		r, s := evaluate(t, sp, get(t, set, "a"))
		if r.Rejected() || s != 0 {
			t.Fatalf("= %+v %d, want allowed, 0", r, s)
		}
		sp.Place(sp.Group(get(t, set, "a")))
	}
}

func TestTopologySpreadOnlyForPickN(t *testing.T) {
	p := spreadPolicy(framework.SpreadConstraint{MaxSkew: 1, TopologyKey: "region"})
	p.Type = framework.PickAll
	c, set := fleet(t, p, spec("a", "region", "east"))
	if sp := (TopologySpread{}).Spreader(c, nil, set.All()); sp != nil {
		t.Error("PickAll got a spreader")
	}
	c, set = fleet(t, spreadPolicy(), spec("a", "region", "east"))
	if sp := (TopologySpread{}).Spreader(c, nil, set.All()); sp != nil {
		t.Error("a policy without constraints got a spreader")
	}
}

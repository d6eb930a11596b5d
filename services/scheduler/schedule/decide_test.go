package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

const (
	nodeCount = "kubernetes-fleet.io/node-count"
	allocCPU  = "resources.kubernetes-fleet.io/allocatable-cpu"
	allocMem  = "resources.kubernetes-fleet.io/allocatable-memory"
)

func TestDecideFirstDecisions(t *testing.T) {
	propertyFleet := []framework.MemberSpec{
		withProps(cluster("small"), nodeCount, "3", allocCPU, "12", allocMem, "48Gi"),
		withProps(cluster("medium"), nodeCount, "8", allocCPU, "32", allocMem, "128Gi"),
		withProps(cluster("large"), nodeCount, "20", allocCPU, "80", allocMem, "320Gi"),
		withProps(cluster("huge"), nodeCount, "50", allocCPU, "200500m", allocMem, "1Ti"),
		cluster("silent"), // reports no properties
	}
	tainted := []framework.MemberSpec{
		cluster("plain-1", "env", "prod"),
		cluster("plain-2", "env", "prod"),
		withTaint(cluster("gpu-1", "env", "prod"), "gpu", "true"),
		withTaint(cluster("gpu-2", "env", "prod"), "gpu", "true"),
		cluster("dev-1", "env", "dev"),
		cluster("dev-2", "env", "dev"),
		cluster("dev-3", "env", "dev"),
	}
	for _, tc := range []struct {
		name    string
		policy  string
		fleet   []framework.MemberSpec
		want    string
		message string // of the Scheduled condition, when unfulfilled
	}{
		{
			name: "PickAll ignores preferences",
			policy: `
placementType: PickAll
affinity:
  clusterAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 50
      preference: {labelSelector: {matchLabels: {env: prod}}}`,
			fleet: []framework.MemberSpec{cluster("a", "env", "prod"), cluster("b")},
			want:  "+a(0/0) +b(0/0)",
		},
		{
			name: "PickAll with matchExpressions",
			policy: `
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms:
      - labelSelector:
          matchExpressions:
          - {key: env, operator: In, values: [prod, staging]}
          - {key: canary, operator: DoesNotExist}`,
			fleet: []framework.MemberSpec{cluster("a", "env", "prod"), cluster("b", "env", "staging", "canary", "yes"), cluster("c", "env", "staging")},
			want:  "+a(0/0) +c(0/0) !b:AffinityMismatch",
		},
		{
			name: "property selector on quantities",
			policy: `
placementType: PickAll
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms:
      - propertySelector:
          matchExpressions:
          - {name: kubernetes-fleet.io/node-count, operator: Ge, values: ["8"]}
          - {name: resources.kubernetes-fleet.io/allocatable-memory, operator: Lt, values: ["0.5Ti"]}`,
			fleet: propertyFleet,
			want:  "+large(0/0) +medium(0/0) !huge:AffinityMismatch !silent:AffinityMismatch !small:AffinityMismatch",
		},
		{
			name: "property selector terms are ORed",
			policy: `
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms:
      - propertySelector: {matchExpressions: [{name: kubernetes-fleet.io/node-count, operator: Eq, values: ["3"]}]}
      - propertySelector: {matchExpressions: [{name: resources.kubernetes-fleet.io/allocatable-cpu, operator: Gt, values: ["200"]}]}`,
			fleet: propertyFleet,
			want:  "+huge(0/0) +small(0/0) !large:AffinityMismatch !medium:AffinityMismatch !silent:AffinityMismatch",
		},
		{
			name: "PickN by a descending property sorter",
			policy: `
placementType: PickN
numberOfClusters: 2
affinity:
  clusterAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference:
        propertySorter: {name: resources.kubernetes-fleet.io/allocatable-cpu, sortOrder: Descending}`,
			fleet: propertyFleet,
			// cpu 12..200.5: large = (80-12)/(188.5) = 36%
			want: "+huge(100/0) +large(36/0) !medium:NotPicked !silent:NotPicked !small:NotPicked",
		},
		{
			name: "PickN by an ascending property sorter within required properties",
			policy: `
placementType: PickN
numberOfClusters: 2
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms:
      - propertySelector: {matchExpressions: [{name: kubernetes-fleet.io/node-count, operator: Gt, values: ["3"]}]}
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 60
      preference:
        propertySorter: {name: kubernetes-fleet.io/node-count, sortOrder: Ascending}`,
			fleet: propertyFleet,
			// node counts 8..50 among candidates: large = (1 - 12/42) * 60 = 43
			want: "+large(43/0) +medium(60/0) !huge:NotPicked !silent:AffinityMismatch !small:AffinityMismatch",
		},
		{
			name: "sorter and label preferences add up",
			policy: `
placementType: PickN
numberOfClusters: 1
affinity:
  clusterAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 10
      preference: {propertySorter: {name: kubernetes-fleet.io/node-count, sortOrder: Descending}}
    - weight: 20
      preference: {labelSelector: {matchLabels: {kubernetes-fleet.io/member-name: medium}}}`,
			fleet: propertyFleet,
			// medium = 20 + round(5/47*10) = 21 beats huge = 10
			want: "+medium(21/0) !huge:NotPicked !large:NotPicked !silent:NotPicked !small:NotPicked",
		},
		{
			name:   "taints keep PickAll off untolerated clusters",
			policy: `placementType: PickAll`,
			fleet:  tainted,
			want:   "+dev-1(0/0) +dev-2(0/0) +dev-3(0/0) +plain-1(0/0) +plain-2(0/0) !gpu-1:TaintNotTolerated !gpu-2:TaintNotTolerated",
		},
		{
			name: "tolerations admit tainted clusters",
			policy: `
placementType: PickAll
tolerations:
- {key: gpu, operator: Equal, value: "true", effect: NoSchedule}`,
			fleet: tainted,
			want:  "+dev-1(0/0) +dev-2(0/0) +dev-3(0/0) +gpu-1(0/0) +gpu-2(0/0) +plain-1(0/0) +plain-2(0/0)",
		},
		{
			name: "unfulfilled PickN says why",
			policy: `
placementType: PickN
numberOfClusters: 3
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms: [{labelSelector: {matchLabels: {env: prod}}}]`,
			fleet:   tainted,
			want:    "+plain-1(0/0) +plain-2(0/0) !dev-1:AffinityMismatch !dev-2:AffinityMismatch !dev-3:AffinityMismatch !gpu-1:TaintNotTolerated !gpu-2:TaintNotTolerated",
			message: "found 2 of 3 required clusters; 5 clusters were rejected: 3 did not match required affinity, 2 are tainted",
		},
		{
			name:    "PickN of more clusters than there are",
			policy:  `{placementType: PickN, numberOfClusters: 3}`,
			fleet:   []framework.MemberSpec{cluster("a"), stale(cluster("b"))},
			want:    "+a(0/0) !b:HeartbeatMissed",
			message: "found 1 of 3 required clusters; 1 cluster was rejected: 1 missed heartbeats",
		},
		{
			name:    "PickN with nothing to pick",
			policy:  `{placementType: PickN, numberOfClusters: 1}`,
			fleet:   nil,
			want:    "",
			message: "found 0 of 1 required clusters; no other cluster is available",
		},
		{
			name:   "PickN of zero",
			policy: `{placementType: PickN, numberOfClusters: 0}`,
			fleet:  []framework.MemberSpec{cluster("a")},
			want:   "!a:NotPicked",
		},
		{
			name:   "eligibility applies to every type",
			policy: `{placementType: PickAll}`,
			fleet: []framework.MemberSpec{
				cluster("ok"), leaving(cluster("going")), stale(cluster("quiet")),
				func() framework.MemberSpec { s := cluster("new"); s.Joined = false; return s }(),
			},
			want:    "+ok(0/0) !going:ClusterLeaving !new:ClusterNotJoined !quiet:HeartbeatMissed",
			message: "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(policy(t, tc.policy), members(t, tc.fleet...), nil, now)
			if got := summary(d); got != tc.want {
				t.Errorf("decision:\n got  %s\n want %s", got, tc.want)
			}
			checkSorted(t, d)
			fulfilled, _, message := d.Condition()
			if fulfilled != (tc.message == "") {
				t.Errorf("fulfilled = %v (%s)", fulfilled, message)
			}
			if tc.message != "" && message != tc.message {
				t.Errorf("message:\n got  %s\n want %s", message, tc.message)
			}
			for _, u := range d.NotChosen {
				if u.Reason.Message == "" {
					t.Errorf("%s: no reason message", u.Cluster)
				}
			}
		})
	}
}

// step is one decision in a sequence for the same placement.
type step struct {
	name   string
	policy string
	fleet  []framework.MemberSpec
	at     time.Duration // after now
	want   string
}

// runSteps decides each step with the previous step's decision. Heartbeats
// move with the step's clock, so a cluster goes quiet only when marked stale.
func runSteps(t *testing.T, steps []step) {
	t.Helper()
	var prev *Decision
	for _, s := range steps {
		var fleet []framework.MemberSpec
		for _, m := range s.fleet {
			m.LastHeartbeat = m.LastHeartbeat.Add(s.at)
			fleet = append(fleet, m)
		}
		d := Decide(policy(t, s.policy), members(t, fleet...), prev, now.Add(s.at))
		if got := summary(d); got != s.want {
			t.Fatalf("%s:\n got  %s\n want %s", s.name, got, s.want)
		}
		checkSorted(t, d)
		prev = d
	}
}

const pickNPreferred = `
placementType: PickN
numberOfClusters: %s
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms: [{labelSelector: {matchLabels: {critical-allowed: "true"}}}]
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference: {propertySorter: {name: kubernetes-fleet.io/node-count, sortOrder: Descending}}
`

func pickN(n string) string { return strings.Replace(pickNPreferred, "%s", n, 1) }

func sized(name, nodes string) framework.MemberSpec {
	return withProps(cluster(name, "critical-allowed", "true"), nodeCount, nodes)
}

func TestStickyPickN(t *testing.T) {
	base := []framework.MemberSpec{sized("a", "10"), sized("b", "20"), sized("c", "30"), sized("d", "40"), sized("e", "50")}
	bigger := append(base[:5:5], sized("f", "90"))

	t.Run("resource-only changes and property drift do not reschedule", func(t *testing.T) {
		drifted := []framework.MemberSpec{sized("a", "10"), sized("b", "99"), sized("c", "30"), sized("d", "1"), sized("e", "50")}
		runSteps(t, []step{
			{"first", pickN("2"), base, 0, "+d(75/0) +e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
			{"same policy", pickN("2"), base, time.Minute, "=d(75/0) =e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
			{"properties changed", pickN("2"), drifted, 2 * time.Minute, "=d(75/0) =e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
		})
	})
	t.Run("raising numberOfClusters only adds", func(t *testing.T) {
		runSteps(t, []step{
			{"first", pickN("2"), base, 0, "+d(75/0) +e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
			// f now outscores everyone; d and e stay and the two best others join.
			{"raise to 4", pickN("4"), bigger, time.Minute, "+c(25/0) =d(75/0) =e(100/0) +f(100/0) !a:NotPicked !b:NotPicked"},
		})
	})
	t.Run("lowering numberOfClusters removes the lowest-scored", func(t *testing.T) {
		runSteps(t, []step{
			{"first", pickN("4"), base, 0, "+b(25/0) +c(50/0) +d(75/0) +e(100/0) !a:NotPicked"},
			{"lower to 2", pickN("2"), base, time.Minute, "=d(75/0) =e(100/0) -b:ScaledDown -c:ScaledDown !a:NotPicked"},
		})
	})
	t.Run("a leaving or deleted cluster is replaced", func(t *testing.T) {
		withoutE := base[:4]
		dLeaving := []framework.MemberSpec{sized("a", "10"), sized("b", "20"), sized("c", "30"), leaving(sized("d", "40"))}
		runSteps(t, []step{
			{"first", pickN("2"), base, 0, "+d(75/0) +e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
			{"e deleted", pickN("2"), withoutE, time.Minute, "+c(67/0) =d(75/0) -e:ClusterLeft !a:NotPicked !b:NotPicked"},
			{"d leaving", pickN("2"), dLeaving, 2 * time.Minute, "+b(50/0) =c(67/0) -d:ClusterLeaving !a:NotPicked"},
		})
	})
	t.Run("missed heartbeats keep what is held but win nothing new", func(t *testing.T) {
		quiet := []framework.MemberSpec{sized("a", "10"), sized("b", "20"), sized("c", "30"), stale(sized("d", "40")), stale(sized("e", "50"))}
		quietBigger := append(quiet[:5:5], sized("f", "90"))
		runSteps(t, []step{
			{"first", pickN("2"), base, 0, "+d(75/0) +e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
			{"d and e go quiet", pickN("2"), quiet, time.Hour, "=d(75/0) =e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
			{"raise to 3", pickN("3"), quietBigger, time.Hour, "=d(75/0) =e(100/0) +f(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
		})
	})
	t.Run("a policy change prefers clusters already chosen", func(t *testing.T) {
		// The new policy also requires tier=gold; e lacks it and is replaced,
		// d still fits and stays though c now scores higher.
		gold := func(s framework.MemberSpec) framework.MemberSpec { s.Labels["tier"] = "gold"; return s }
		fleet := []framework.MemberSpec{gold(sized("a", "10")), gold(sized("b", "20")), gold(sized("c", "30")), gold(sized("d", "40")), sized("e", "50")}
		changed := `
placementType: PickN
numberOfClusters: 2
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms: [{labelSelector: {matchLabels: {critical-allowed: "true", tier: gold}}}]
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference: {propertySorter: {name: kubernetes-fleet.io/node-count, sortOrder: Ascending}}
`
		runSteps(t, []step{
			{"first", pickN("2"), fleet, 0, "+d(75/0) +e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
			{"new policy", changed, fleet, time.Minute, "+a(100/0) =d(0/0) -e:AffinityMismatch !b:NotPicked !c:NotPicked"},
		})
	})
	t.Run("a policy change keeps a quiet cluster that still fits", func(t *testing.T) {
		quiet := []framework.MemberSpec{sized("a", "10"), sized("b", "20"), sized("c", "30"), stale(sized("d", "40")), sized("e", "50")}
		changed := strings.Replace(pickN("2"), "weight: 100", "weight: 50", 1)
		runSteps(t, []step{
			{"first", pickN("2"), base, 0, "+d(75/0) +e(100/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
			{"new weights", changed, quiet, time.Hour, "=d(38/0) =e(50/0) !a:NotPicked !b:NotPicked !c:NotPicked"},
		})
	})
	t.Run("a policy change trims surplus held clusters", func(t *testing.T) {
		changed := strings.Replace(pickN("2"), "Descending", "Ascending", 1)
		runSteps(t, []step{
			{"first", pickN("3"), base, 0, "+c(50/0) +d(75/0) +e(100/0) !a:NotPicked !b:NotPicked"},
			// Held c, d and e still fit; only the best two of them (by the new
			// ascending sorter) stay, and nothing new is added.
			{"new policy", changed, base, time.Minute, "=c(50/0) =d(25/0) -e:NotPicked !a:NotPicked !b:NotPicked"},
		})
	})
}

const spreadByRegion = `
placementType: PickN
numberOfClusters: %s
topologySpreadConstraints:
- {maxSkew: 1, topologyKey: region, whenUnsatisfiable: DoNotSchedule}
`

func TestStickyPickNWithSpread(t *testing.T) {
	fleet := []framework.MemberSpec{
		cluster("e1", "region", "east"), cluster("e2", "region", "east"), cluster("e3", "region", "east"),
		cluster("w1", "region", "west"), cluster("w2", "region", "west"),
		cluster("n1", "region", "north"),
	}
	n := func(s string) string { return strings.Replace(spreadByRegion, "%s", s, 1) }
	t.Run("scale up and down keep the spread", func(t *testing.T) {
		runSteps(t, []step{
			{"three", n("3"), fleet, 0, "+e1(0/-1) +n1(0/0) +w1(0/1) !e2:NotPicked !e3:NotPicked !w2:NotPicked"},
			{"five", n("5"), fleet, time.Minute, "=e1(0/-1) +e2(0/-1) =n1(0/0) =w1(0/1) +w2(0/0) !e3:NotPicked"},
			// Removing from the crowded regions keeps one per region; among
			// equals the last by name goes first.
			{"three again", n("3"), fleet, 2 * time.Minute, "=e1(0/-1) =n1(0/0) =w1(0/1) -e2:ScaledDown -w2:ScaledDown !e3:NotPicked"},
		})
	})
	t.Run("a replacement respects the spread", func(t *testing.T) {
		noN1 := fleet[:5]
		runSteps(t, []step{
			{"three", n("3"), fleet, 0, "+e1(0/-1) +n1(0/0) +w1(0/1) !e2:NotPicked !e3:NotPicked !w2:NotPicked"},
			// With north gone, east and west each take one more at most.
			{"north leaves", n("3"), noN1, time.Minute, "=e1(0/-1) +e2(0/-1) =w1(0/1) -n1:ClusterLeft !e3:NotPicked !w2:NotPicked"},
		})
	})
	t.Run("adding a spread constraint re-spreads held clusters", func(t *testing.T) {
		plain := `{placementType: PickN, numberOfClusters: 3}`
		runSteps(t, []step{
			{"no spread", plain, fleet, 0, "+e1(0/0) +e2(0/0) +e3(0/0) !n1:NotPicked !w1:NotPicked !w2:NotPicked"},
			{"spread", n("3"), fleet, time.Minute,
				"=e1(0/-1) +n1(0/0) +w1(0/1) -e2:TopologySpreadViolated -e3:TopologySpreadViolated !w2:NotPicked"},
		})
	})
}

func TestStickyPickAll(t *testing.T) {
	prod := `
placementType: PickAll
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms: [{labelSelector: {matchLabels: {environment: production}}}]`
	staging := strings.Replace(prod, "production", "staging", 1)
	a, b := cluster("a", "environment", "production"), cluster("b", "environment", "production")
	relabelled := cluster("b", "environment", "staging")
	runSteps(t, []step{
		{"first", prod, []framework.MemberSpec{a, b, cluster("x")}, 0, "+a(0/0) +b(0/0) !x:AffinityMismatch"},
		{"a new eligible cluster joins", prod, []framework.MemberSpec{a, b, cluster("c", "environment", "production"), cluster("x")}, time.Minute,
			"=a(0/0) =b(0/0) +c(0/0) !x:AffinityMismatch"},
		// Required affinity is ignored during execution: b keeps the placement.
		{"b relabelled", prod, []framework.MemberSpec{a, relabelled, cluster("c", "environment", "production"), cluster("x")}, 2 * time.Minute,
			"=a(0/0) =b(0/0) =c(0/0) !x:AffinityMismatch"},
		{"c leaves, a goes quiet", prod, []framework.MemberSpec{stale(a), relabelled, leaving(cluster("c", "environment", "production")), cluster("x")}, 3 * time.Minute,
			"=a(0/0) =b(0/0) -c:ClusterLeaving !x:AffinityMismatch"},
		{"new quiet cluster is not chosen", prod, []framework.MemberSpec{stale(a), relabelled, stale(cluster("d", "environment", "production")), cluster("x")}, 4 * time.Minute,
			"=a(0/0) =b(0/0) !d:HeartbeatMissed !x:AffinityMismatch"},
		// A policy change re-evaluates: a no longer matches, b does now.
		{"policy changed", staging, []framework.MemberSpec{stale(a), relabelled, stale(cluster("d", "environment", "production")), cluster("x")}, 5 * time.Minute,
			"=b(0/0) -a:AffinityMismatch !d:HeartbeatMissed !x:AffinityMismatch"},
	})
}

func TestStickyPickFixed(t *testing.T) {
	fixed := func(names string) string { return "{placementType: PickFixed, clusterNames: [" + names + "]}" }
	fleet := []framework.MemberSpec{cluster("c1"), cluster("c2"), cluster("c3")}
	runSteps(t, []step{
		{"first", fixed("c1, c2"), fleet, 0, "+c1(0/0) +c2(0/0)"},
		{"unchanged", fixed("c2, c1"), fleet, time.Minute, "=c1(0/0) =c2(0/0)"},
		{"c2 leaves", fixed("c1, c2"), []framework.MemberSpec{cluster("c1"), leaving(cluster("c2")), cluster("c3")}, 2 * time.Minute,
			"=c1(0/0) -c2:ClusterLeaving"},
		{"c2 is gone", fixed("c1, c2"), []framework.MemberSpec{cluster("c1"), cluster("c3")}, 3 * time.Minute,
			"=c1(0/0) !c2:ClusterNotFound"},
		{"names changed", fixed("c3"), []framework.MemberSpec{cluster("c1"), cluster("c3")}, 4 * time.Minute,
			"+c3(0/0) -c1:NotInClusterNames"},
	})
}

func TestChanged(t *testing.T) {
	p := policy(t, pickN("2"))
	fleet := members(t, sized("a", "10"), sized("b", "20"), sized("c", "30"))
	first := Decide(p, fleet, nil, now)
	if !first.Changed(nil) {
		t.Error("a first decision is a change")
	}
	again := Decide(p, fleet, first, now.Add(time.Minute))
	if again.Changed(first) {
		t.Errorf("an identical decision is a change:\n%s\n%s", summary(first), summary(again))
	}
	scaled := Decide(policy(t, pickN("3")), fleet, again, now.Add(time.Minute))
	if !scaled.Changed(again) {
		t.Error("adding a cluster is not a change")
	}
	// A placement that stays unfulfilled for a new reason is a change: the
	// condition message moves.
	short := policy(t, pickN("5"))
	before := Decide(short, fleet, nil, now)
	after := Decide(short, members(t, sized("a", "10"), sized("b", "20"), sized("c", "30"), withProps(cluster("d"), nodeCount, "1")), before, now)
	if !after.Changed(before) {
		t.Error("a new rejection reason is not a change")
	}
}

func TestDecideDoesNotModifyPrevious(t *testing.T) {
	p := policy(t, pickN("2"))
	first := Decide(p, members(t, sized("a", "10"), sized("b", "20"), sized("c", "30")), nil, now)
	before := summary(first)
	Decide(policy(t, pickN("1")), members(t, sized("a", "10")), first, now)
	if summary(first) != before {
		t.Errorf("previous decision changed: %s -> %s", before, summary(first))
	}
}

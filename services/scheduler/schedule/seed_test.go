package schedule

import (
	"fmt"
	"testing"

	"github.com/flotilla-dev/flotilla/harness/seeds"
)

// The placements of seed 001 ("Kubernetes resource propagation from hub
// cluster to member clusters"), decided over small fleets.

func TestSeedPickAllProduction(t *testing.T) {
	p := placement(t, seeds.Read(t, "001-1.yaml"))
	fleet := members(t,
		cluster("prod-1", "environment", "production"),
		cluster("prod-2", "environment", "production"),
		cluster("staging-1", "environment", "staging"),
		cluster("dev-1"),
	)
	d := Decide(p, fleet, nil, now)
	if got, want := summary(d), "+prod-1(0/0) +prod-2(0/0) !dev-1:AffinityMismatch !staging-1:AffinityMismatch"; got != want {
		t.Errorf("decision:\n got  %s\n want %s", got, want)
	}
	fulfilled, reason, message := d.Condition()
	if !fulfilled || reason != "SchedulingPolicyFulfilled" || message != "found all the clusters needed as specified by the scheduling policy" {
		t.Errorf("condition = %v %s %q", fulfilled, reason, message)
	}
	if got, want := d.Chosen[0].Message(), `Successfully scheduled resources for placement in "prod-1" (affinity score: 0, topology spread score: 0): picked by scheduling policy`; got != want {
		t.Errorf("message:\n got  %s\n want %s", got, want)
	}
	checkSorted(t, d)
}

func TestSeedPickAllWithoutAffinityTakesEveryCluster(t *testing.T) {
	p := placement(t, `
spec:
  resourceSelectors: [{group: "", kind: Namespace, name: prod-deployment, version: v1}]
`)
	d := Decide(p, members(t, cluster("a"), cluster("b")), nil, now)
	if got := chosenNames(d); got != "a,b" {
		t.Errorf("chosen %s, want a,b", got)
	}
}

func TestSeedPickFixed(t *testing.T) {
	p := placement(t, seeds.Read(t, "001-2.yaml"))
	t.Run("both present", func(t *testing.T) {
		d := Decide(p, members(t, cluster("cluster1"), cluster("cluster2"), cluster("cluster3")), nil, now)
		if got, want := summary(d), "+cluster1(0/0) +cluster2(0/0)"; got != want {
			t.Errorf("decision: got %s, want %s", got, want)
		}
		if !d.Fulfilled || d.Needed != 2 {
			t.Errorf("fulfilled %v needed %d", d.Fulfilled, d.Needed)
		}
	})
	t.Run("one missing", func(t *testing.T) {
		d := Decide(p, members(t, cluster("cluster1"), cluster("cluster3")), nil, now)
		if got, want := summary(d), "+cluster1(0/0) !cluster2:ClusterNotFound"; got != want {
			t.Errorf("decision: got %s, want %s", got, want)
		}
		_, reason, message := d.Condition()
		if want := "found 1 of 2 required clusters; 1 cluster was rejected: 1 was not found"; reason != "SchedulingPolicyUnfulfilled" || message != want {
			t.Errorf("condition = %s %q, want %q", reason, message, want)
		}
	})
	t.Run("one leaving, one not beating", func(t *testing.T) {
		d := Decide(p, members(t, leaving(cluster("cluster1")), stale(cluster("cluster2"))), nil, now)
		if got, want := summary(d), "!cluster1:ClusterLeaving !cluster2:HeartbeatMissed"; got != want {
			t.Errorf("decision: got %s, want %s", got, want)
		}
	})
	t.Run("taints do not apply", func(t *testing.T) {
		d := Decide(p, members(t, withTaint(cluster("cluster1"), "gpu", "true"), cluster("cluster2")), nil, now)
		if got := chosenNames(d); got != "cluster1,cluster2" {
			t.Errorf("chosen %s", got)
		}
	})
}

// The seed writes the PickN example loosely (preferred terms as a map, the
// preference as a list, critical-level as a number); this is the form the API
// accepts.
const seedPickN = `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp
spec:
  resourceSelectors:
    - {group: "", kind: Namespace, name: app, version: v1}
  policy:
    placementType: PickN
    numberOfClusters: 3
    affinity:
        clusterAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 20
              preference:
                labelSelector:
                  matchLabels:
                    critical-level: "1"
            requiredDuringSchedulingIgnoredDuringExecution:
                clusterSelectorTerms:
                - labelSelector:
                    matchLabels:
                      critical-allowed: "true"
`

func TestSeedPickNWithAffinities(t *testing.T) {
	p := placement(t, seedPickN)
	fleet := members(t,
		cluster("a", "critical-allowed", "true", "critical-level", "2"),
		cluster("b", "critical-allowed", "true", "critical-level", "1"),
		cluster("c", "critical-allowed", "false", "critical-level", "1"),
		cluster("d", "critical-allowed", "true"),
		cluster("e", "critical-allowed", "true", "critical-level", "1"),
		cluster("f", "critical-level", "1"),
	)
	d := Decide(p, fleet, nil, now)
	// b and e earn the preference; a and d tie at 0 and a wins by name.
	want := "+a(0/0) +b(20/0) +e(20/0) !c:AffinityMismatch !d:NotPicked !f:AffinityMismatch"
	if got := summary(d); got != want {
		t.Errorf("decision:\n got  %s\n want %s", got, want)
	}
	if !d.Fulfilled || d.Found() != 3 || d.Needed != 3 {
		t.Errorf("fulfilled %v found %d needed %d", d.Fulfilled, d.Found(), d.Needed)
	}
	if got, want := d.Chosen[1].Message(), `Successfully scheduled resources for placement in "b" (affinity score: 20, topology spread score: 0): picked by scheduling policy`; got != want {
		t.Errorf("message:\n got  %s\n want %s", got, want)
	}
	checkSorted(t, d)
}

const seedSpread = `
spec:
  resourceSelectors:
    - {group: "", kind: Namespace, name: app, version: v1}
  policy:
    placementType: PickN
    numberOfClusters: %d
    topologySpreadConstraints:
    - maxSkew: 2
      topologyKey: region
      whenUnsatisfiable: DoNotSchedule
    - maxSkew: 2
      topologyKey: updateDay
      whenUnsatisfiable: ScheduleAnyway
`

func TestSeedPickNTopologySpread(t *testing.T) {
	fleet := members(t,
		cluster("e1", "region", "east", "updateDay", "mon"),
		cluster("e2", "region", "east", "updateDay", "mon"),
		cluster("e3", "region", "east", "updateDay", "mon"),
		cluster("e4", "region", "east", "updateDay", "tue"),
		cluster("e5", "region", "east", "updateDay", "wed"),
		cluster("e6", "region", "east", "updateDay", "mon"),
		cluster("w1", "region", "west", "updateDay", "mon"),
		cluster("w2", "region", "west", "updateDay", "tue"),
	)
	t.Run("six fit", func(t *testing.T) {
		d := Decide(placement(t, fmt.Sprintf(seedSpread, 6)), fleet, nil, now)
		// Picks alternate regions while west lasts, and favour the emptiest
		// update day; east may then run two ahead of west (maxSkew 2).
		want := "+e1(0/-2) +e2(0/-2) +e4(0/-1) +e5(0/0) +w1(0/0) +w2(0/1) !e3:NotPicked !e6:NotPicked"
		if got := summary(d); got != want {
			t.Errorf("decision:\n got  %s\n want %s", got, want)
		}
		if !d.Fulfilled {
			t.Error("not fulfilled")
		}
	})
	t.Run("a seventh would break the region skew", func(t *testing.T) {
		d := Decide(placement(t, fmt.Sprintf(seedSpread, 7)), fleet, nil, now)
		if got := chosenNames(d); got != "e1,e2,e4,e5,w1,w2" {
			t.Errorf("chosen %s", got)
		}
		_, _, message := d.Condition()
		if want := "found 6 of 7 required clusters; 2 clusters were rejected: 2 would violate topology spread constraints"; message != want {
			t.Errorf("message:\n got  %s\n want %s", message, want)
		}
		for _, u := range d.NotChosen {
			if u.Reason.Message != `placing the resources on the cluster would violate topology spread constraint "region" (max skew 2)` {
				t.Errorf("%s: %s", u.Cluster, u.Reason.Message)
			}
		}
	})
}

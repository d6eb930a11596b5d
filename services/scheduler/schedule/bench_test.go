package schedule

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// benchFleet is 5,000 members labelled and sized like a large real fleet:
// 10 regions of 3 zones, three environments, five update days, and node
// counts, cpu and memory that vary per cluster.
func benchFleet(b testing.TB, n int) *framework.MemberSet {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	regions := []string{"eastus", "eastus2", "westus", "westus2", "centralus", "northeurope", "westeurope", "uksouth", "japaneast", "australiaeast"}
	envs := []string{"production", "production", "production", "staging", "staging", "dev"}
	days := []string{"mon", "tue", "wed", "thu", "fri"}
	ms := make([]*framework.Member, 0, n)
	for i := range n {
		region := regions[rng.IntN(len(regions))]
		nodes := 3 + rng.IntN(200)
		spec := framework.MemberSpec{
			Name: fmt.Sprintf("member-%05d", i),
			Labels: map[string]string{
				"region":                         region,
				"zone":                           fmt.Sprintf("%s-%d", region, 1+rng.IntN(3)),
				"environment":                    envs[rng.IntN(len(envs))],
				"updateDay":                      days[rng.IntN(len(days))],
				"critical-allowed":               fmt.Sprint(rng.IntN(10) < 7),
				"critical-level":                 fmt.Sprint(1 + rng.IntN(3)),
				"team":                           fmt.Sprintf("team-%d", rng.IntN(40)),
				"fleet.azure.com/location":       region,
				"fleet.azure.com/resource-group": fmt.Sprintf("rg-%d", rng.IntN(100)),
			},
			Properties: map[string]string{
				nodeCount: fmt.Sprint(nodes),
				allocCPU:  fmt.Sprintf("%dm", nodes*(3500+rng.IntN(60000))),
				allocMem:  fmt.Sprintf("%dMi", nodes*(12000+rng.IntN(250000))),
				"resources.kubernetes-fleet.io/available-cpu":    fmt.Sprintf("%dm", nodes*rng.IntN(3500)),
				"resources.kubernetes-fleet.io/available-memory": fmt.Sprintf("%dMi", nodes*rng.IntN(12000)),
			},
			Joined:        true,
			LastHeartbeat: now.Add(-time.Duration(rng.IntN(60)) * time.Second),
		}
		if rng.IntN(50) == 0 {
			spec.Taints = []framework.Taint{{Key: "maintenance", Value: "true", Effect: framework.TaintEffectNoSchedule}}
		}
		m, err := framework.NewMember(spec)
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	return framework.NewMemberSet(ms...)
}

const benchPickN = `
placementType: PickN
numberOfClusters: 100
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms:
      - labelSelector:
          matchLabels: {critical-allowed: "true"}
          matchExpressions: [{key: environment, operator: In, values: [production, staging]}]
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 60
      preference:
        propertySorter: {name: resources.kubernetes-fleet.io/allocatable-cpu, sortOrder: Descending}
    - weight: 20
      preference:
        labelSelector: {matchLabels: {critical-level: "1"}}
topologySpreadConstraints:
- {maxSkew: 1, topologyKey: region, whenUnsatisfiable: DoNotSchedule}
- {maxSkew: 2, topologyKey: updateDay, whenUnsatisfiable: ScheduleAnyway}
`

const benchPickAll = `
placementType: PickAll
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms:
      - labelSelector: {matchLabels: {environment: production}}
`

func benchDecide(b *testing.B, doc string, sticky bool) {
	fleet := benchFleet(b, 5000)
	p := policy(b, doc)
	var prev *Decision
	if sticky {
		prev = Decide(p, fleet, nil, now)
	}
	d := Decide(p, fleet, prev, now)
	b.ReportMetric(float64(d.Found()), "chosen")
	b.ResetTimer()
	b.ReportAllocs()
	for b.Loop() {
		Decide(p, fleet, prev, now)
	}
}

// BenchmarkDecidePickN is a fresh PickN of 100 out of 5,000 with a required
// label term, a preferred property sorter and two spread constraints.
func BenchmarkDecidePickN(b *testing.B) { benchDecide(b, benchPickN, false) }

// BenchmarkDecidePickNSticky re-decides that placement under the same policy,
// as on a member heartbeat: nothing moves.
func BenchmarkDecidePickNSticky(b *testing.B) { benchDecide(b, benchPickN, true) }

// BenchmarkDecidePickAll is a fresh PickAll with a required label term.
func BenchmarkDecidePickAll(b *testing.B) { benchDecide(b, benchPickAll, false) }

// BenchmarkDecidePickAllSticky re-decides that placement under the same policy.
func BenchmarkDecidePickAllSticky(b *testing.B) { benchDecide(b, benchPickAll, true) }

func TestBenchPickNSpreadsEvenly(t *testing.T) {
	fleet := benchFleet(t, 5000)
	d := Decide(policy(t, benchPickN), fleet, nil, now)
	if d.Found() != 100 || !d.Fulfilled {
		t.Fatalf("found %d of 100", d.Found())
	}
	perRegion := map[string]int{}
	for _, c := range d.Chosen {
		m, _ := fleet.Get(c.Cluster)
		perRegion[m.Labels["region"]]++
	}
	for region, n := range perRegion {
		if n != 10 {
			t.Errorf("%s holds %d clusters, want 10 of 100 across 10 regions (max skew 1)", region, n)
		}
	}
}

// BenchmarkMemberSetHeartbeat replaces one member of 5,000 with new
// properties, as a heartbeat does; label columns are shared, not rebuilt.
func BenchmarkMemberSetHeartbeat(b *testing.B) {
	fleet := benchFleet(b, 5000)
	old := fleet.At(2500)
	spec := old.MemberSpec
	spec.Properties = map[string]string{nodeCount: "42", allocCPU: "100", allocMem: "400Gi"}
	spec.LastHeartbeat = now
	m, err := framework.NewMember(spec)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		fleet.With(m)
	}
}

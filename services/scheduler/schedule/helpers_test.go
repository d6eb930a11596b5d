package schedule

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"sigs.k8s.io/yaml"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// cluster is a joined member with a fresh heartbeat and the given labels.
func cluster(name string, kv ...string) framework.MemberSpec {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return framework.MemberSpec{Name: name, Labels: l, Joined: true, LastHeartbeat: now.Add(-10 * time.Second)}
}

func withProps(s framework.MemberSpec, kv ...string) framework.MemberSpec {
	s.Properties = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Properties[kv[i]] = kv[i+1]
	}
	return s
}

func withTaint(s framework.MemberSpec, key, value string) framework.MemberSpec {
	s.Taints = append(s.Taints, framework.Taint{Key: key, Value: value, Effect: framework.TaintEffectNoSchedule})
	return s
}

func leaving(s framework.MemberSpec) framework.MemberSpec {
	s.Leaving = true
	return s
}

func stale(s framework.MemberSpec) framework.MemberSpec {
	s.LastHeartbeat = now.Add(-time.Hour)
	return s
}

func members(t *testing.T, specs ...framework.MemberSpec) *framework.MemberSet {
	t.Helper()
	var ms []*framework.Member
	for _, s := range specs {
		m, err := framework.NewMember(s)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return framework.NewMemberSet(ms...)
}

// placement decodes a ClusterResourcePlacement and compiles its policy.
func placement(t *testing.T, doc string) *framework.Policy {
	t.Helper()
	var crp api.ClusterResourcePlacement
	if err := yaml.UnmarshalStrict([]byte(doc), &crp); err != nil {
		t.Fatalf("decode placement: %v", err)
	}
	p, err := CompilePolicy(crp.Spec.Policy)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// policy decodes and compiles the body of spec.policy.
func policy(t testing.TB, doc string) *framework.Policy {
	t.Helper()
	var p api.PlacementPolicy
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		t.Fatalf("decode policy: %v", err)
	}
	compiled, err := CompilePolicy(&p)
	if err != nil {
		t.Fatal(err)
	}
	return compiled
}

// summary renders a decision compactly for comparisons:
// "+a(20/0) =b(0/0) -c:ScaledDown !d:AffinityMismatch".
func summary(d *Decision) string {
	var parts []string
	for _, c := range d.Chosen {
		mark := "+"
		if c.Action == Kept {
			mark = "="
		}
		parts = append(parts, fmt.Sprintf("%s%s(%d/%d)", mark, c.Cluster, c.Scores.Affinity, c.Scores.TopologySpread))
	}
	for _, r := range d.Removed {
		parts = append(parts, fmt.Sprintf("-%s:%s", r.Cluster, r.Reason.Code))
	}
	for _, r := range d.NotChosen {
		parts = append(parts, fmt.Sprintf("!%s:%s", r.Cluster, r.Reason.Code))
	}
	return strings.Join(parts, " ")
}

func chosenNames(d *Decision) string { return strings.Join(d.ChosenNames(), ",") }

func checkSorted(t *testing.T, d *Decision) {
	t.Helper()
	names := d.ChosenNames()
	if !slices.IsSorted(names) {
		t.Errorf("chosen not sorted: %v", names)
	}
	for _, list := range [][]Unchosen{d.Removed, d.NotChosen} {
		if !slices.IsSortedFunc(list, func(a, b Unchosen) int { return strings.Compare(a.Cluster, b.Cluster) }) {
			t.Errorf("not sorted: %v", list)
		}
	}
}

package framework

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

func TestPropertyRequirementComparesQuantities(t *testing.T) {
	m, err := NewMember(MemberSpec{Name: "c", Properties: map[string]string{"cpu": "1500m", "memory": "2Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, value string
		op          PropertyOperator
		want        bool
	}{
		{"cpu", "1.5", OpEq, true},
		{"cpu", "1500m", OpGe, true},
		{"cpu", "1", OpGt, true},
		{"cpu", "2", OpLt, true},
		{"cpu", "1.5", OpLe, true},
		{"cpu", "1.5", OpNe, false},
		{"cpu", "2", OpGe, false},
		{"memory", "2048Mi", OpEq, true},
		{"memory", "2G", OpGt, true}, // 2Gi > 2G
		{"memory", "3Gi", OpLt, true},
		{"gpu", "0", OpGe, false}, // not reported: never matches
	} {
		r := PropertyRequirement{Name: tc.name, Operator: tc.op, Value: resource.MustParse(tc.value)}
		if got := r.Matches(m); got != tc.want {
			t.Errorf("%s %s %s = %v, want %v", tc.name, tc.op, tc.value, got, tc.want)
		}
	}
}

func TestTermAndsLabelsAndProperties(t *testing.T) {
	m, err := NewMember(MemberSpec{Name: "c", Labels: map[string]string{"env": "prod"}, Properties: map[string]string{"nodes": "5"}})
	if err != nil {
		t.Fatal(err)
	}
	prod := labels.SelectorFromSet(labels.Set{"env": "prod"})
	big := PropertyRequirement{Name: "nodes", Operator: OpGe, Value: resource.MustParse("10")}
	small := PropertyRequirement{Name: "nodes", Operator: OpLt, Value: resource.MustParse("10")}
	for _, tc := range []struct {
		name string
		term Term
		want bool
	}{
		{"empty term matches all", Term{}, true},
		{"labels only", Term{Labels: prod}, true},
		{"labels and matching property", Term{Labels: prod, Properties: []PropertyRequirement{small}}, true},
		{"labels and failing property", Term{Labels: prod, Properties: []PropertyRequirement{big}}, false},
		{"failing labels", Term{Labels: labels.SelectorFromSet(labels.Set{"env": "dev"})}, false},
	} {
		if got := tc.term.Matches(m); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTolerationTolerates(t *testing.T) {
	gpu := &Taint{Key: "gpu", Value: "true", Effect: TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		tol  Toleration
		want bool
	}{
		{"equal by default", Toleration{Key: "gpu", Value: "true"}, true},
		{"equal, other value", Toleration{Key: "gpu", Operator: TolerationOpEqual, Value: "false"}, false},
		{"equal, other key", Toleration{Key: "ssd", Value: "true"}, false},
		{"exists by key", Toleration{Key: "gpu", Operator: TolerationOpExists}, true},
		{"exists with empty key tolerates all", Toleration{Operator: TolerationOpExists}, true},
		{"matching effect", Toleration{Key: "gpu", Value: "true", Effect: TaintEffectNoSchedule}, true},
		{"other effect", Toleration{Key: "gpu", Value: "true", Effect: "NoExecute"}, false},
		{"unknown operator", Toleration{Key: "gpu", Operator: "In", Value: "true"}, false},
	} {
		if got := tc.tol.Tolerates(gpu); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

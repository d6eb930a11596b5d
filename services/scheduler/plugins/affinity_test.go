package plugins

import (
	"testing"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestRequiredAffinity(t *testing.T) {
	withNodes := func(s framework.MemberSpec, n string) framework.MemberSpec {
		s.Properties = map[string]string{"kubernetes-fleet.io/node-count": n}
		return s
	}
	specs := []framework.MemberSpec{
		withNodes(spec("prod-east", "environment", "production", "region", "east"), "10"),
		withNodes(spec("prod-west", "environment", "production", "region", "west"), "3"),
		spec("staging", "environment", "staging", "region", "east"),
		spec("bare"),
	}
	atLeast5 := framework.PropertyRequirement{Name: "kubernetes-fleet.io/node-count", Operator: framework.OpGe, Value: resource.MustParse("5")}

	for _, tc := range []struct {
		name  string
		terms []framework.Term
		want  []string // members that pass
	}{
		{"no terms", nil, []string{"bare", "prod-east", "prod-west", "staging"}},
		{"matchLabels", []framework.Term{{Labels: selector(t, "environment=production")}}, []string{"prod-east", "prod-west"}},
		{"In", []framework.Term{{Labels: selector(t, "environment in (production,staging)")}}, []string{"prod-east", "prod-west", "staging"}},
		{"NotIn", []framework.Term{{Labels: selector(t, "environment notin (production)")}}, []string{"bare", "staging"}},
		{"Exists", []framework.Term{{Labels: selector(t, "region")}}, []string{"prod-east", "prod-west", "staging"}},
		{"DoesNotExist", []framework.Term{{Labels: selector(t, "!region")}}, []string{"bare"}},
		{"labels ANDed", []framework.Term{{Labels: selector(t, "environment=production,region=east")}}, []string{"prod-east"}},
		{"terms ORed", []framework.Term{
			{Labels: selector(t, "region=west")},
			{Labels: selector(t, "environment=staging")},
		}, []string{"prod-west", "staging"}},
		{"property", []framework.Term{{Properties: []framework.PropertyRequirement{atLeast5}}}, []string{"prod-east"}},
		{"labels and property ANDed", []framework.Term{{
			Labels: selector(t, "region=west"), Properties: []framework.PropertyRequirement{atLeast5},
		}}, nil},
		{"member-name label", []framework.Term{{Labels: selector(t, "kubernetes-fleet.io/member-name=bare")}}, []string{"bare"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, set := fleet(t, &framework.Policy{Type: framework.PickAll, Required: tc.terms}, specs...)
			var got []string
			for _, m := range set.All() {
				r := filter(RequiredAffinity{}, c, m)
				if !r.Rejected() {
					got = append(got, m.Name)
				} else if r.Code != framework.ReasonAffinityMismatch {
					t.Errorf("%s rejected with %s", m.Name, r.Code)
				}
			}
			if !equal(got, tc.want) {
				t.Errorf("passed %v, want %v", got, tc.want)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

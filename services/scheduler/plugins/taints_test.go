package plugins

import (
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

func TestTaintToleration(t *testing.T) {
	tainted := func(name string, taints ...framework.Taint) framework.MemberSpec {
		s := spec(name)
		s.Taints = taints
		return s
	}
	gpu := framework.Taint{Key: "gpu", Value: "true", Effect: framework.TaintEffectNoSchedule}
	maint := framework.Taint{Key: "maintenance", Effect: framework.TaintEffectNoSchedule}
	soft := framework.Taint{Key: "soft", Effect: "PreferNoSchedule"}
	specs := []framework.MemberSpec{
		tainted("clean"),
		tainted("gpu", gpu),
		tainted("gpu-maint", gpu, maint),
		tainted("soft", soft),
	}
	for _, tc := range []struct {
		name        string
		typ         framework.PlacementType
		tolerations []framework.Toleration
		want        []string
	}{
		{"no tolerations", framework.PickAll, nil, []string{"clean", "soft"}},
		{"tolerate gpu by value", framework.PickN, []framework.Toleration{{Key: "gpu", Value: "true"}}, []string{"clean", "gpu", "soft"}},
		{"tolerate gpu with a wrong value", framework.PickN, []framework.Toleration{{Key: "gpu", Value: "false"}}, []string{"clean", "soft"}},
		{"every taint must be tolerated", framework.PickAll, []framework.Toleration{
			{Key: "gpu", Operator: framework.TolerationOpExists},
			{Key: "maintenance", Operator: framework.TolerationOpExists, Effect: framework.TaintEffectNoSchedule},
		}, []string{"clean", "gpu", "gpu-maint", "soft"}},
		{"exists with no key tolerates all", framework.PickAll, []framework.Toleration{{Operator: framework.TolerationOpExists}},
			[]string{"clean", "gpu", "gpu-maint", "soft"}},
		{"PickFixed ignores taints", framework.PickFixed, nil, []string{"clean", "gpu", "gpu-maint", "soft"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, set := fleet(t, &framework.Policy{Type: tc.typ, Tolerations: tc.tolerations}, specs...)
			var got []string
			for _, m := range set.All() {
				r := filter(TaintToleration{}, c, m)
				if !r.Rejected() {
					got = append(got, m.Name)
					continue
				}
				if r.Code != framework.ReasonTaintNotTolerated || !strings.Contains(r.Message, "taint gpu=true:NoSchedule") && !strings.Contains(r.Message, "maintenance:NoSchedule") {
					t.Errorf("%s: %+v", m.Name, r)
				}
			}
			if !equal(got, tc.want) {
				t.Errorf("passed %v, want %v", got, tc.want)
			}
		})
	}
}

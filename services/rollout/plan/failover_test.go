package plan_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/services/rollout/plan"
)

// A failover is make-before-break: the lost cluster's copy stays while it is down
// and until the replacement is available, and the replacement is added even with
// maxSurge 0 (the released copy does not count).
func TestFailoverIsMakeBeforeBreak(t *testing.T) {
	survivor := plan.Cluster{Name: "m2", Scheduled: true, Holds: true, Current: true, Ready: true}
	lost := plan.Cluster{Name: "m1", Holds: true, Current: true, Ready: true}
	for _, tt := range []struct {
		name        string
		lost        plan.Release
		replacement plan.Cluster
		add, remove []string
		waits       string
	}{
		{"lost and down: the replacement is added, the copy stays", plan.ReleaseWhenBack,
			plan.Cluster{Name: "m3", Scheduled: true}, []string{"m3"}, nil, "once it is back"},
		{"down, the replacement available: the copy still stays", plan.ReleaseWhenBack,
			plan.Cluster{Name: "m3", Scheduled: true, Holds: true, Current: true, Ready: true}, nil, nil, "once it is back"},
		{"back, the replacement not available yet: the copy stays", plan.ReleaseWhenAvailable,
			plan.Cluster{Name: "m3", Scheduled: true, Holds: true, Current: true}, nil, nil, "make-before-break"},
		{"back, the replacement available: the copy goes", plan.ReleaseWhenAvailable,
			plan.Cluster{Name: "m3", Scheduled: true, Holds: true, Current: true, Ready: true}, nil, []string{"m1"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := lost
			l.Release = tt.lost
			p, err := plan.Decide(plan.Input{Target: 2, Strategy: strategy(num(1), num(0)),
				Clusters: []plan.Cluster{l, survivor, tt.replacement}})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Add, tt.add) || !slices.Equal(p.Remove, tt.remove) {
				t.Errorf("add %v remove %v, want add %v remove %v", p.Add, p.Remove, tt.add, tt.remove)
			}
			if why := p.Waiting["m1"]; !strings.Contains(why, tt.waits) || (tt.waits == "") != (why == "") {
				t.Errorf("m1 waits for %q, want %q", why, tt.waits)
			}
		})
	}
}

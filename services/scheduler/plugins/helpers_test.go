package plugins

import (
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"k8s.io/apimachinery/pkg/labels"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// spec is a joined member with a fresh heartbeat.
func spec(name string, kv ...string) framework.MemberSpec {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return framework.MemberSpec{Name: name, Labels: l, Joined: true, LastHeartbeat: now.Add(-time.Second)}
}

// fleet builds a member set and a cycle of policy over it.
func fleet(t *testing.T, p *framework.Policy, specs ...framework.MemberSpec) (*framework.Cycle, *framework.MemberSet) {
	t.Helper()
	var ms []*framework.Member
	for _, s := range specs {
		m, err := framework.NewMember(s)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	set := framework.NewMemberSet(ms...)
	return framework.NewCycle(p, set, now), set
}

func get(t *testing.T, s *framework.MemberSet, name string) *framework.Member {
	t.Helper()
	m, ok := s.Get(name)
	if !ok {
		t.Fatalf("no member %s", name)
	}
	return m
}

func selector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// filter runs one filter plugin on m; a plugin with nothing to check passes.
func filter(p framework.FilterPlugin, c *framework.Cycle, m *framework.Member) framework.Reason {
	f := p.Filterer(c)
	if f == nil {
		return framework.Reason{}
	}
	return f.Filter(m)
}

package framework

import (
	"strings"
	"testing"
	"time"
)

func TestNewMemberParsesPropertiesOnce(t *testing.T) {
	m, err := NewMember(MemberSpec{
		Name:       "c1",
		Labels:     map[string]string{"region": "east"},
		Properties: map[string]string{"node-count": "12", "resources.kubernetes-fleet.io/allocatable-memory": "64Gi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := m.Property("node-count")
	if !ok || p.Quantity.Value() != 12 || p.Float != 12 {
		t.Errorf("node-count = %v %v, want 12", p, ok)
	}
	mem, _ := m.Property("resources.kubernetes-fleet.io/allocatable-memory")
	if mem.Float != 64*1024*1024*1024 {
		t.Errorf("memory = %v, want 64Gi in bytes", mem.Float)
	}
	if _, ok := m.Property("missing"); ok {
		t.Error("a property the member does not report was found")
	}
	if got := m.Labels[MemberNameLabel]; got != "c1" {
		t.Errorf("member-name label = %q, want c1", got)
	}
	if m.HeartbeatPeriod != DefaultHeartbeatPeriod {
		t.Errorf("heartbeat period = %s, want the default", m.HeartbeatPeriod)
	}
}

func TestNewMemberDoesNotShareCallerMaps(t *testing.T) {
	labels := map[string]string{"region": "east"}
	m, err := NewMember(MemberSpec{Name: "c1", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	labels["region"] = "west"
	if m.Labels["region"] != "east" {
		t.Error("changing the caller's labels changed the member")
	}
	if _, ok := labels[MemberNameLabel]; ok {
		t.Error("NewMember wrote into the caller's labels")
	}
}

func TestNewMemberRejectsBadQuantity(t *testing.T) {
	_, err := NewMember(MemberSpec{Name: "c1", Properties: map[string]string{"node-count": "many"}})
	if err == nil || !strings.Contains(err.Error(), "node-count") {
		t.Fatalf("err = %v, want one naming the property", err)
	}
}

func TestHeartbeatFresh(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		last   time.Time
		period time.Duration
		want   bool
	}{
		{"never", time.Time{}, 0, false},
		{"just now", now, 0, true},
		{"three default periods ago", now.Add(-3 * time.Minute), 0, true},
		{"past three default periods", now.Add(-3*time.Minute - time.Second), 0, false},
		{"within three short periods", now.Add(-25 * time.Second), 10 * time.Second, true},
		{"past three short periods", now.Add(-31 * time.Second), 10 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMember(MemberSpec{Name: "c", LastHeartbeat: tc.last, HeartbeatPeriod: tc.period})
			if err != nil {
				t.Fatal(err)
			}
			if got := m.HeartbeatFresh(now); got != tc.want {
				t.Errorf("HeartbeatFresh = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMemberSetIsSortedAndCopyOnWrite(t *testing.T) {
	mk := func(name, region string) *Member {
		m, err := NewMember(MemberSpec{Name: name, Labels: map[string]string{"region": region}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	s := NewMemberSet(mk("c", "x"), mk("a", "x"), mk("b", "x"))
	var names []string
	for i, m := range s.All() {
		names = append(names, m.Name)
		if m.Index() != i {
			t.Errorf("%s has index %d, want %d", m.Name, m.Index(), i)
		}
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Errorf("order = %v, want a,b,c", names)
	}

	s2 := s.With(mk("b", "y")).With(mk("0", "x")).Without("c")
	if s.Len() != 3 {
		t.Errorf("the original set changed: %d members", s.Len())
	}
	if b, _ := s.Get("b"); b.Labels["region"] != "x" {
		t.Error("the original set's member changed")
	}
	if b, _ := s2.Get("b"); b.Labels["region"] != "y" || b.Index() != 2 {
		t.Errorf("replaced b = %v at %d, want region y at 2", b.Labels, b.Index())
	}
	if _, ok := s2.Get("c"); ok {
		t.Error("c is still in the set")
	}
	if s2.At(0).Name != "0" {
		t.Errorf("first = %s, want 0", s2.At(0).Name)
	}
}

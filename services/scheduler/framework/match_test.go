package framework

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

func mustMember(t *testing.T, name string, lbls map[string]string, props map[string]string) *Member {
	t.Helper()
	m, err := NewMember(MemberSpec{Name: name, Labels: lbls, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A bound term must answer exactly as the term itself does.
func TestBoundTermAgreesWithTerm(t *testing.T) {
	set := NewMemberSet(
		mustMember(t, "a", map[string]string{"env": "prod", "region": "east", "tier": ""}, map[string]string{"n": "5"}),
		mustMember(t, "b", map[string]string{"env": "dev", "region": "west"}, map[string]string{"n": "50"}),
		mustMember(t, "c", map[string]string{"env": "prod"}, nil),
		mustMember(t, "d", nil, map[string]string{"n": "7"}),
	)
	selectors := []string{
		"", "env=prod", "env==prod", "env!=prod", "env in (prod,dev)", "env notin (prod)",
		"region", "!region", "tier", "tier=", "env=prod,region=east", "unknown", "!unknown",
		"unknown=x", "unknown!=x", "kubernetes-fleet.io/member-name in (a,d)",
	}
	for _, s := range selectors {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		for _, props := range [][]PropertyRequirement{nil, {{Name: "n", Operator: OpGt, Value: resource.MustParse("6")}}} {
			term := Term{Labels: sel, Properties: props}
			bound := term.Bind(set)
			for _, m := range set.All() {
				if got, want := bound.Matches(m), term.Matches(m); got != want {
					t.Errorf("%q (%d property requirements) on %s: bound %v, term %v", s, len(props), m.Name, got, want)
				}
			}
		}
	}
	nothing := Term{Labels: labels.Nothing()}
	bound := nothing.Bind(set)
	if bound.Matches(set.At(0)) {
		t.Error("labels.Nothing matched")
	}
}

// Replacing a member in place must update the columns the copy sees and leave
// the original set's columns alone.
func TestWithReplacesColumns(t *testing.T) {
	before := NewMemberSet(
		mustMember(t, "a", map[string]string{"env": "prod"}, map[string]string{"cpu": "4"}),
		mustMember(t, "b", map[string]string{"env": "dev"}, map[string]string{"cpu": "8"}),
	)
	after := before.
		With(mustMember(t, "a", map[string]string{"env": "staging", "zone": "z1"}, map[string]string{"cpu": "16", "gpu": "1"})).
		With(mustMember(t, "b", map[string]string{"env": "dev"}, map[string]string{"cpu": "2"}))

	check := func(set *MemberSet, sel string, want ...string) {
		t.Helper()
		term := Term{Labels: labels.SelectorFromSet(nil)}
		s, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		term.Labels = s
		b := term.Bind(set)
		var got []string
		for _, m := range set.All() {
			if b.Matches(m) {
				got = append(got, m.Name)
			}
		}
		if len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) {
			t.Errorf("%s: matched %v, want %v", sel, got, want)
		}
	}
	check(before, "env=prod", "a")
	check(before, "zone")
	check(after, "env=prod")
	check(after, "env=staging", "a")
	check(after, "zone=z1", "a")
	check(after, "env=dev", "b")

	float := func(set *MemberSet, prop, name string) (float64, bool) {
		m, _ := set.Get(name)
		col := set.PropertyColumn(prop)
		if col == nil {
			return 0, false
		}
		return col.Float(m.Index())
	}
	if v, _ := float(before, "cpu", "a"); v != 4 {
		t.Errorf("before a cpu = %v, want 4", v)
	}
	if v, _ := float(after, "cpu", "a"); v != 16 {
		t.Errorf("after a cpu = %v, want 16", v)
	}
	if v, _ := float(after, "cpu", "b"); v != 2 {
		t.Errorf("after b cpu = %v, want 2", v)
	}
	if _, ok := float(after, "gpu", "b"); ok {
		t.Error("b reports gpu")
	}
	if v, ok := float(after, "gpu", "a"); !ok || v != 1 {
		t.Errorf("after a gpu = %v %v, want 1", v, ok)
	}
	if _, ok := float(before, "gpu", "a"); ok {
		t.Error("the original set sees gpu")
	}

	// Dropping a label clears the member's row.
	dropped := after.With(mustMember(t, "a", map[string]string{"env": "staging"}, nil))
	check(dropped, "zone")
	check(after, "zone=z1", "a")
	if _, ok := float(dropped, "cpu", "a"); ok {
		t.Error("a still reports cpu after dropping it")
	}

	// Removing a member re-indexes the rest.
	without := after.Without("a")
	check(without, "env=dev", "b")
	if v, _ := float(without, "cpu", "b"); v != 2 {
		t.Errorf("without a, b cpu = %v, want 2", v)
	}
}

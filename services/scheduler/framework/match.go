package framework

import "k8s.io/apimachinery/pkg/labels"

// Matcher is a Term bound to the columns of one member set: it tests members
// of that set by index, with each label requirement answered by a table over
// the label's distinct values. Bind once per decision.
type Matcher struct {
	never  bool
	labels []labelTest
	props  []PropertyRequirement
}

// labelTest is one label requirement bound to a column.
type labelTest struct {
	rows   []int32 // nil when no member has the key
	absent bool    // the answer for a member without the label
	table  []bool  // the answer per value id
}

// Bind binds the term to the members of s. The semantics are apimachinery's:
// each requirement is evaluated once per distinct value with labels.Requirement.
func (t *Term) Bind(s *MemberSet) Matcher {
	b := Matcher{props: t.Properties}
	if t.Labels == nil {
		return b
	}
	reqs, selectable := t.Labels.Requirements()
	if !selectable {
		return Matcher{never: true}
	}
	for _, r := range reqs {
		lt := labelTest{absent: r.Matches(labels.Set{})}
		if col := s.Label(r.Key()); col != nil {
			lt.rows = col.rows
			lt.table = make([]bool, len(col.values))
			for id, v := range col.values {
				lt.table[id] = r.Matches(labels.Set{r.Key(): v})
			}
		}
		b.labels = append(b.labels, lt)
	}
	return b
}

// Matches reports whether m, a member of the bound set, satisfies the term.
func (b *Matcher) Matches(m *Member) bool {
	if b.never {
		return false
	}
	i := m.Index()
	for k := range b.labels {
		lt := &b.labels[k]
		ok := lt.absent
		if lt.rows != nil {
			if id := lt.rows[i]; id >= 0 {
				ok = lt.table[id]
			}
		}
		if !ok {
			return false
		}
	}
	for k := range b.props {
		if !b.props[k].Matches(m) {
			return false
		}
	}
	return true
}

package framework

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MemberNameLabel is set on every member to its own name, so that label
// selectors can pick clusters by name.
const MemberNameLabel = "kubernetes-fleet.io/member-name"

// DefaultHeartbeatPeriod applies when a member does not say how often it beats.
const DefaultHeartbeatPeriod = 60 * time.Second

// MissedHeartbeats is how many heartbeat periods may pass before a member is
// no longer chosen anew.
const MissedHeartbeats = 3

// TaintEffectNoSchedule is the only taint effect the scheduler acts on.
const TaintEffectNoSchedule = "NoSchedule"

// Taint keeps placements off a member unless they tolerate it.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// String renders the taint as kubectl does: key=value:Effect.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Property is a member property parsed once, when the member is built.
type Property struct {
	Quantity resource.Quantity
	// Float is Quantity as a float64, for interpolating property sorters.
	Float float64
}

// MemberSpec is what the scheduler needs to know about a member cluster.
type MemberSpec struct {
	Name   string
	Labels map[string]string
	Taints []Taint
	// Properties are Kubernetes quantities by property name, e.g.
	// "kubernetes-fleet.io/node-count": "12".
	Properties map[string]string
	Joined     bool
	Leaving    bool
	// LastHeartbeat is when the member last reported; the zero time means never.
	LastHeartbeat time.Time
	// HeartbeatPeriod is how often the member reports; zero means DefaultHeartbeatPeriod.
	HeartbeatPeriod time.Duration
	// Unreachable: the member's latest heartbeat says its API server could not
	// be reached. It keeps what it holds but is not chosen anew.
	Unreachable bool
	// Namespaces are the member's namespaces as its heartbeats report them
	// (api.MemberClusterStatus.Namespaces); nil when it reports none.
	Namespaces map[string]string
}

// Member is a member cluster prepared for scheduling: labels include the
// member-name label, properties are parsed, and taints are pre-rendered. A
// Member is immutable once built; build a new one when the cluster changes.
type Member struct {
	MemberSpec
	properties map[string]Property
	taintTexts []string
	index      int
	// staleAt is when the heartbeat goes stale, in Unix nanoseconds
	// (math.MinInt64 when the member never beat): HeartbeatFresh runs for
	// every member of every decision.
	staleAt int64
}

// NewMember prepares a member for scheduling. It fails when a property value
// is not a Kubernetes quantity.
func NewMember(spec MemberSpec) (*Member, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("new member: name is empty")
	}
	m := &Member{MemberSpec: spec, index: -1}
	m.Labels = make(map[string]string, len(spec.Labels)+1)
	for k, v := range spec.Labels {
		m.Labels[k] = v
	}
	if _, ok := m.Labels[MemberNameLabel]; !ok {
		m.Labels[MemberNameLabel] = spec.Name
	}
	m.Taints = slices.Clone(spec.Taints)
	if m.HeartbeatPeriod <= 0 {
		m.HeartbeatPeriod = DefaultHeartbeatPeriod
	}
	m.properties = make(map[string]Property, len(spec.Properties))
	for name, value := range spec.Properties {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("new member %s: property %s=%q: %w", spec.Name, name, value, err)
		}
		m.properties[name] = Property{Quantity: q, Float: q.AsApproximateFloat64()}
	}
	m.staleAt = math.MinInt64
	if !m.LastHeartbeat.IsZero() {
		m.staleAt = m.LastHeartbeat.Add(MissedHeartbeats * m.HeartbeatPeriod).UnixNano()
	}
	m.taintTexts = make([]string, len(m.Taints))
	for i, t := range m.Taints {
		m.taintTexts[i] = t.String()
	}
	return m, nil
}

// Property returns the parsed value of a property, if the member reports it.
func (m *Member) Property(name string) (Property, bool) {
	p, ok := m.properties[name]
	return p, ok
}

// TaintText returns Taints[i] rendered as key=value:Effect without allocating.
func (m *Member) TaintText(i int) string { return m.taintTexts[i] }

// Index is the member's position in its MemberSet (members sorted by name),
// or -1 when it is in none. Plugins use it to keep per-member state in slices.
func (m *Member) Index() int { return m.index }

// HeartbeatFresh reports whether the member has beaten within
// MissedHeartbeats periods of now.
func (m *Member) HeartbeatFresh(now time.Time) bool {
	return now.UnixNano() <= m.staleAt
}

// MemberSet is an immutable set of members sorted by name, so that "ties
// break by name" is a comparison of indexes. Share one set between decisions
// and replace it (With, Without) when a member changes.
type MemberSet struct {
	members []*Member
	byName  map[string]int // index in members
	cols    columns
}

// NewMemberSet builds a set from members; a later member replaces an earlier
// one of the same name. The members are copied, so one Member may belong to
// several sets.
func NewMemberSet(members ...*Member) *MemberSet {
	byName := make(map[string]*Member, len(members))
	for _, m := range members {
		byName[m.Name] = m
	}
	list := make([]*Member, 0, len(byName))
	for _, m := range byName {
		list = append(list, m)
	}
	slices.SortFunc(list, func(a, b *Member) int { return cmp.Compare(a.Name, b.Name) })
	index := make(map[string]int, len(list))
	for i, m := range list {
		c := *m
		c.index = i
		list[i] = &c
		index[c.Name] = i
	}
	return &MemberSet{members: list, byName: index, cols: buildColumns(list)}
}

// Label returns the column of a label key, or nil when no member has the key.
func (s *MemberSet) Label(key string) *LabelColumn {
	if s == nil {
		return nil
	}
	return s.cols.labels[key]
}

// PropertyColumn returns the column of a property, or nil when no member
// reports it.
func (s *MemberSet) PropertyColumn(name string) *PropertyColumn {
	if s == nil {
		return nil
	}
	return s.cols.properties[name]
}

// Len is the number of members.
func (s *MemberSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.members)
}

// At returns the i-th member in name order.
func (s *MemberSet) At(i int) *Member { return s.members[i] }

// Get returns the member of that name.
func (s *MemberSet) Get(name string) (*Member, bool) {
	if s == nil {
		return nil, false
	}
	i, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return s.members[i], true
}

// All returns the members in name order; the slice must not be modified.
func (s *MemberSet) All() []*Member {
	if s == nil {
		return nil
	}
	return s.members
}

// With returns a new set in which m is added or replaces the member of its
// name. Replacing is cheap (the common case: a heartbeat, new properties);
// adding re-indexes the whole set.
func (s *MemberSet) With(m *Member) *MemberSet {
	if old, ok := s.Get(m.Name); ok {
		c := *m
		c.index = old.index
		list := slices.Clone(s.members)
		list[c.index] = &c
		// Names keep their indexes, so the name index is shared.
		return &MemberSet{members: list, byName: s.byName, cols: s.cols.replaceRow(c.index, old, &c, len(list))}
	}
	list := make([]*Member, 0, s.Len()+1)
	for _, old := range s.All() {
		if old.Name != m.Name {
			list = append(list, old)
		}
	}
	return NewMemberSet(append(list, m)...)
}

// Without returns a new set without the member of that name.
func (s *MemberSet) Without(name string) *MemberSet {
	list := make([]*Member, 0, s.Len())
	for _, old := range s.All() {
		if old.Name != name {
			list = append(list, old)
		}
	}
	return NewMemberSet(list...)
}

// NamespaceReason says why m cannot take a ResourcePlacement of namespace ns:
// the zero Reason when m reports the namespace.
func (m *Member) NamespaceReason(ns string) Reason {
	switch _, ok := m.Namespaces[ns]; {
	case ok:
		return Reason{}
	case m.Namespaces == nil:
		return Reason{Code: ReasonNamespaceNotFound, Message: "the cluster reports no namespaces, so it cannot take a ResourcePlacement"}
	}
	return Reason{Code: ReasonNamespaceNotFound, Message: fmt.Sprintf("the cluster does not have the namespace %q of the ResourcePlacement", ns)}
}

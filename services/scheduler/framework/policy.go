package framework

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// PlacementType is how a policy picks clusters.
type PlacementType string

// Placement types, as in Fleet.
const (
	PickAll   PlacementType = "PickAll"
	PickFixed PlacementType = "PickFixed"
	PickN     PlacementType = "PickN"
)

// Policy is a placement's scheduling policy compiled for evaluation: selectors
// are parsed, quantities are parsed and defaults are applied. Build it once per
// policy change, not per decision.
type Policy struct {
	Type PlacementType
	// ClusterNames are the clusters of a PickFixed policy, without duplicates.
	ClusterNames []string
	// NumberOfClusters is N for PickN.
	NumberOfClusters int
	// Required terms are ORed; no terms means every cluster matches.
	Required []Term
	// Preferred terms score PickN candidates; PickAll ignores them.
	Preferred []Preference
	// Spread constraints apply to PickN only.
	Spread      []SpreadConstraint
	Tolerations []Toleration
	// Key identifies the policy apart from numberOfClusters: decisions made
	// under one key are sticky, a new key re-evaluates them.
	Key string
	// Namespace is a ResourcePlacement's namespace, which a cluster must have
	// to be chosen; "" for a ClusterResourcePlacement.
	Namespace string
}

// Term is one cluster selector term: its label selector and property
// requirements are ANDed.
type Term struct {
	// Labels is nil when the term has no label selector.
	Labels     labels.Selector
	Properties []PropertyRequirement
}

// Matches reports whether the member satisfies the term. A member that does not
// report a property does not match a requirement on it.
func (t *Term) Matches(m *Member) bool {
	if t.Labels != nil && !t.Labels.Matches(labels.Set(m.Labels)) {
		return false
	}
	for i := range t.Properties {
		if !t.Properties[i].Matches(m) {
			return false
		}
	}
	return true
}

// PropertyOperator compares a member property with a value.
type PropertyOperator string

// Property operators, as in Fleet.
const (
	OpGt PropertyOperator = "Gt"
	OpGe PropertyOperator = "Ge"
	OpEq PropertyOperator = "Eq"
	OpNe PropertyOperator = "Ne"
	OpLt PropertyOperator = "Lt"
	OpLe PropertyOperator = "Le"
)

// PropertyRequirement is one property selector expression.
type PropertyRequirement struct {
	Name     string
	Operator PropertyOperator
	Value    resource.Quantity
}

// Matches reports whether the member's property satisfies the requirement.
func (r *PropertyRequirement) Matches(m *Member) bool {
	p, ok := m.Property(r.Name)
	if !ok {
		return false
	}
	c := p.Quantity.Cmp(r.Value)
	switch r.Operator {
	case OpGt:
		return c > 0
	case OpGe:
		return c >= 0
	case OpEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpLt:
		return c < 0
	case OpLe:
		return c <= 0
	}
	return false
}

// SortOrder says which end of a property sorter's range earns the weight.
type SortOrder string

// Sort orders, as in Fleet: Descending favours large values.
const (
	Ascending  SortOrder = "Ascending"
	Descending SortOrder = "Descending"
)

// PropertySorter interpolates a preference's weight between the smallest and
// largest value of a property among the candidates.
type PropertySorter struct {
	Name  string
	Order SortOrder
}

// Preference is one preferred affinity term.
type Preference struct {
	Weight int32
	Term   Term
	// Sorter is nil when a match earns the whole weight.
	Sorter *PropertySorter
}

// WhenUnsatisfiable says what a spread constraint does about a violation.
type WhenUnsatisfiable string

// Spread constraint modes, as in Fleet.
const (
	DoNotSchedule  WhenUnsatisfiable = "DoNotSchedule"
	ScheduleAnyway WhenUnsatisfiable = "ScheduleAnyway"
)

// SpreadConstraint is a topology spread constraint with its defaults applied.
type SpreadConstraint struct {
	MaxSkew           int
	TopologyKey       string
	WhenUnsatisfiable WhenUnsatisfiable
}

// Toleration operators, as in Kubernetes.
const (
	TolerationOpEqual  = "Equal"
	TolerationOpExists = "Exists"
)

// Toleration lets a placement onto members with a matching taint.
type Toleration struct {
	Key      string
	Operator string // Equal (the default) or Exists
	Value    string
	Effect   string // empty tolerates every effect
}

// Tolerates reports whether the toleration matches the taint, with
// Kubernetes' rules: Exists with an empty key matches every taint.
func (t *Toleration) Tolerates(taint *Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	switch t.Operator {
	case TolerationOpExists:
		return t.Key == "" || t.Key == taint.Key
	case TolerationOpEqual, "":
		return t.Key == taint.Key && t.Value == taint.Value
	}
	return false
}

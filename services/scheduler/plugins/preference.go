package plugins

import (
	"math"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// PreferredAffinity scores PickN candidates by the preferred cluster affinity
// terms: a matching term earns its weight, and a term with a property sorter
// earns its weight scaled linearly by where the cluster's value sits between
// the smallest and largest value among the members scored (Descending favours
// large values, Ascending small ones). The weights are summed. PickAll and
// PickFixed ignore preferences.
type PreferredAffinity struct{}

// Name implements framework.Plugin.
func (PreferredAffinity) Name() string { return "ClusterPreference" }

// Scorer implements framework.ScorePlugin.
func (PreferredAffinity) Scorer(c *framework.Cycle, members []*framework.Member) framework.Scorer {
	prefs := c.Policy.Preferred
	if c.Policy.Type != framework.PickN || len(prefs) == 0 {
		return nil
	}
	s := &preferenceScorer{terms: make([]boundPreference, len(prefs))}
	for i := range prefs {
		bp := &s.terms[i]
		bp.Preference = &prefs[i]
		bp.matcher = prefs[i].Term.Bind(c.Members)
		if prefs[i].Sorter != nil {
			bp.column = c.Members.PropertyColumn(prefs[i].Sorter.Name)
			bp.valueRange = rangeOf(bp.column, members)
		}
	}
	return s
}

// boundPreference is a preference bound to the members of one decision.
type boundPreference struct {
	*framework.Preference
	matcher framework.Matcher
	column  *framework.PropertyColumn // of the sorted property; nil if no member reports it
	valueRange
}

// valueRange is the smallest and largest value of a property among members.
type valueRange struct {
	min, max float64
	seen     bool
}

func rangeOf(col *framework.PropertyColumn, members []*framework.Member) valueRange {
	var r valueRange
	if col == nil {
		return r
	}
	for _, m := range members {
		v, ok := col.Float(m.Index())
		if !ok {
			continue
		}
		if !r.seen {
			r = valueRange{min: v, max: v, seen: true}
			continue
		}
		r.min = min(r.min, v)
		r.max = max(r.max, v)
	}
	return r
}

type preferenceScorer struct {
	terms []boundPreference
}

func (s *preferenceScorer) Score(m *framework.Member) int32 {
	var total int32
	for i := range s.terms {
		p := &s.terms[i]
		if !p.matcher.Matches(m) {
			continue
		}
		if p.Sorter == nil {
			total += p.Weight
			continue
		}
		total += p.interpolate(m)
	}
	return total
}

// interpolate scales a sorter's weight by the member's value. A member without
// the property earns nothing; so does everyone when all values are equal, as
// there is nothing to prefer.
func (p *boundPreference) interpolate(m *framework.Member) int32 {
	r := p.valueRange
	if p.column == nil || !r.seen || r.max == r.min {
		return 0
	}
	v, ok := p.column.Float(m.Index())
	if !ok {
		return 0
	}
	// Members outside the range (none when the range was taken over the same
	// members) are clamped.
	f := (min(max(v, r.min), r.max) - r.min) / (r.max - r.min)
	if p.Sorter.Order == framework.Ascending {
		f = 1 - f
	}
	return int32(math.Round(f * float64(p.Weight)))
}

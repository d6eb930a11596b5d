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
	s := &preferenceScorer{prefs: prefs, ranges: make([]valueRange, len(prefs))}
	for i := range prefs {
		if prefs[i].Sorter != nil {
			s.ranges[i] = rangeOf(prefs[i].Sorter.Name, members)
		}
	}
	return s
}

// valueRange is the smallest and largest value of a property among members.
type valueRange struct {
	min, max float64
	seen     bool
}

func rangeOf(property string, members []*framework.Member) valueRange {
	var r valueRange
	for _, m := range members {
		p, ok := m.Property(property)
		if !ok {
			continue
		}
		if !r.seen {
			r = valueRange{min: p.Float, max: p.Float, seen: true}
			continue
		}
		r.min = min(r.min, p.Float)
		r.max = max(r.max, p.Float)
	}
	return r
}

type preferenceScorer struct {
	prefs  []framework.Preference
	ranges []valueRange
}

func (s *preferenceScorer) Score(m *framework.Member) int32 {
	var total int32
	for i := range s.prefs {
		p := &s.prefs[i]
		if !p.Term.Matches(m) {
			continue
		}
		if p.Sorter == nil {
			total += p.Weight
			continue
		}
		total += interpolate(p, s.ranges[i], m)
	}
	return total
}

// interpolate scales a sorter's weight by the member's value. A member without
// the property earns nothing; so does everyone when all values are equal, as
// there is nothing to prefer.
func interpolate(p *framework.Preference, r valueRange, m *framework.Member) int32 {
	v, ok := m.Property(p.Sorter.Name)
	if !ok || !r.seen || r.max == r.min {
		return 0
	}
	// Members outside the range (none when the range was taken over the same
	// members) are clamped.
	f := (min(max(v.Float, r.min), r.max) - r.min) / (r.max - r.min)
	if p.Sorter.Order == framework.Ascending {
		f = 1 - f
	}
	return int32(math.Round(f * float64(p.Weight)))
}

package sim

import (
	"fmt"
	"strconv"
)

// Labels every simulated member carries, beside its spread.
const (
	// SimulatedLabel is "true" on every simulated member, so that a placement can keep to
	// simulated members or avoid them.
	SimulatedLabel = "flotilla.dev/simulated"
	// IndexLabel is the member's 0-based index in its fleet.
	IndexLabel = "flotilla.dev/sim-index"
)

// Spread generates member labels spread over regions, zones and environments, so that
// placements with affinities and topology spread constraints have something to choose
// between. Member i is in region i mod len(Regions) and, within it, zone
// (i / len(Regions)) mod Zones; its environment is drawn by weight from the member's index,
// so the mix is the same in every run.
type Spread struct {
	// Regions are the region label values, in turn.
	Regions []string
	// Zones is how many zones each region has: <region>-1 ... <region>-<Zones>.
	Zones int
	// Environments and their weights (any positive numbers).
	Environments []Weighted
}

// Weighted is a label value with a weight.
type Weighted struct {
	Value  string
	Weight float64
}

// DefaultSpread: six regions of three zones, 60% production, 25% staging, 15% development.
var DefaultSpread = Spread{
	Regions: []string{"eastus", "westus", "centralus", "northeurope", "westeurope", "southeastasia"},
	Zones:   3,
	Environments: []Weighted{
		{"production", 60}, {"staging", 25}, {"development", 15},
	},
}

// Label keys of Spread.
const (
	RegionLabel      = "region"
	ZoneLabel        = "zone"
	EnvironmentLabel = "environment"
)

// Labels are member i's labels: region, zone, environment, SimulatedLabel and IndexLabel.
func (s Spread) Labels(i int) map[string]string {
	l := map[string]string{SimulatedLabel: "true", IndexLabel: strconv.Itoa(i)}
	if n := len(s.Regions); n > 0 {
		region := s.Regions[i%n]
		l[RegionLabel] = region
		if s.Zones > 0 {
			l[ZoneLabel] = fmt.Sprintf("%s-%d", region, (i/n)%s.Zones+1)
		}
	}
	if env := pick(s.Environments, draw(0, "environment", strconv.Itoa(i))); env != "" {
		l[EnvironmentLabel] = env
	}
	return l
}

// pick returns the value u falls on when the weights are laid end to end over [0, 1).
func pick(ws []Weighted, u float64) string {
	var total float64
	for _, w := range ws {
		total += max(w.Weight, 0)
	}
	if total == 0 {
		return ""
	}
	at := u * total
	for _, w := range ws {
		if at < max(w.Weight, 0) {
			return w.Value
		}
		at -= max(w.Weight, 0)
	}
	return ws[len(ws)-1].Value
}

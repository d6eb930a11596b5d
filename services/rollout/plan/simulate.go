package plan

import "slices"

// Step is one batch of a rollout: the clusters updated in place, added and
// removed together.
type Step struct {
	Update, Add, Remove []string
}

// Simulate plays Decide step after step from in, assuming that every cluster
// a step updates or adds becomes available, and every removal is carried out,
// before the next step: the batches the rollout would go in under its
// maxUnavailable and maxSurge. It returns the steps and the clusters no step
// reaches, with why (an External strategy's clusters, say).
func Simulate(in Input) ([]Step, map[string]string, error) {
	clusters := slices.Clone(in.Clusters)
	index := make(map[string]int, len(clusters))
	for i, c := range clusters {
		index[c.Name] = i
	}
	var steps []Step
	// Each step changes at least one cluster for good, so there are at most
	// as many steps as clusters (twice: a removal then nothing more).
	for range 2*len(clusters) + 1 {
		p, err := Decide(Input{Target: in.Target, Strategy: in.Strategy, Clusters: clusters})
		if err != nil {
			return nil, nil, err
		}
		if len(p.Update)+len(p.Add)+len(p.Remove) == 0 {
			if len(p.Waiting) == 0 {
				p.Waiting = nil
			}
			return steps, p.Waiting, nil
		}
		steps = append(steps, Step{Update: p.Update, Add: p.Add, Remove: p.Remove})
		for _, n := range append(slices.Clone(p.Update), p.Add...) {
			c := &clusters[index[n]]
			c.Holds, c.Current, c.Ready, c.Failed = true, true, true, false
		}
		for _, n := range p.Remove {
			c := &clusters[index[n]]
			c.Holds, c.Current, c.Ready = false, false, false
		}
	}
	return steps, nil, nil
}

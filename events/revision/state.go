package revision

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// ErrMismatch is returned by Apply when the assembled state does not hold
// the number of clusters the revision says it has: a bug, or a piece that
// was lost before a base. The revision is applied all the same.
var ErrMismatch = errors.New("the assembled state does not match the revision")

// Decision is a placement's scheduling decision as a consumer assembles it
// from events.PlacementScheduledV2 revisions. Its JSON is that of a
// events.PlacementScheduled (v1) with the revision added, so state stored
// from v1 decisions reads as revision 0.
type Decision struct {
	Placement string `json:"placement"`
	// Revision is the revision applied last.
	Revision      int64             `json:"revision,omitempty"`
	Generation    int64             `json:"generation"`
	PlacementType api.PlacementType `json:"placementType"`
	Wanted        int               `json:"wanted"`
	// Chosen are the clusters the placement is bound to, by name.
	Chosen []events.ClusterDecision `json:"chosen"`
	// Removed are the clusters removed from the decision and not chosen
	// again since (reset by a base), by name, with why.
	Removed []events.ClusterDecision `json:"removed,omitempty"`
	// NotChosen are the clusters shown as not chosen, by name, with why.
	NotChosen []events.ClusterDecision `json:"notChosen,omitempty"`
	// Released are the clusters a failover or failback moved the placement
	// away from (action lost or released), by name: their copies are removed
	// make-before-break.
	Released  []events.ClusterDecision `json:"released,omitempty"`
	Fulfilled bool                     `json:"fulfilled"`
	Message   string                   `json:"message,omitempty"`
}

// Apply applies one whole revision (its pieces in order) on top of d.
func (d *Decision) Apply(pieces []events.PlacementScheduledV2) error {
	if err := checkRevision(pieces); err != nil {
		return err
	}
	h := pieces[0]
	chosen, removed, notChosen, released := byName(d.Chosen), byName(d.Removed), byName(d.NotChosen), byName(d.Released)
	if h.Base {
		chosen, removed, notChosen, released = map[string]events.ClusterDecision{}, map[string]events.ClusterDecision{}, map[string]events.ClusterDecision{}, map[string]events.ClusterDecision{}
	}
	for _, p := range pieces {
		for _, c := range p.Clusters {
			_, was := chosen[c.Cluster]
			delete(chosen, c.Cluster)
			delete(notChosen, c.Cluster)
			delete(removed, c.Cluster)
			delete(released, c.Cluster)
			switch c.Action {
			case events.ActionAdded, events.ActionKept:
				chosen[c.Cluster] = c
			case events.ActionRemoved:
				if was || h.Base {
					removed[c.Cluster] = c
				}
			case events.ActionLost, events.ActionReleased:
				released[c.Cluster] = c
			default:
				notChosen[c.Cluster] = c
			}
		}
	}
	*d = Decision{
		Placement: h.Placement, Revision: h.Revision, Generation: h.Generation, PlacementType: h.PlacementType,
		Wanted: h.Wanted, Fulfilled: h.Fulfilled, Message: h.Message,
		Chosen: sorted(chosen), Removed: sorted(removed), NotChosen: sorted(notChosen), Released: sorted(released),
	}
	if d.Chosen == nil {
		d.Chosen = []events.ClusterDecision{}
	}
	if len(d.Chosen) != h.ChosenCount {
		return fmt.Errorf("%w: decision revision %d of %s chooses %d clusters, %d assembled", ErrMismatch, h.Revision, h.Placement, h.ChosenCount, len(d.Chosen))
	}
	return nil
}

// RemovalReason is why a cluster was removed, if the decision says.
func (d *Decision) RemovalReason(cluster string) string {
	if i, ok := search(d.Removed, cluster, func(c events.ClusterDecision) string { return c.Cluster }); ok {
		return d.Removed[i].Reason
	}
	if r, ok := d.ReleasedAs(cluster); ok {
		return r.Reason
	}
	return ""
}

// ReleasedAs returns the entry of a cluster failover or failback moved the
// placement away from (action lost or released).
func (d *Decision) ReleasedAs(cluster string) (events.ClusterDecision, bool) {
	if i, ok := search(d.Released, cluster, func(c events.ClusterDecision) string { return c.Cluster }); ok {
		return d.Released[i], true
	}
	return events.ClusterDecision{}, false
}

// Progress is a placement's rollout progress as a consumer assembles it from
// events.RolloutProgressedV2 revisions. Its JSON is that of a
// events.RolloutProgressed (v1) with the revision added, so state stored
// from v1 progress reads as revision 0.
type Progress struct {
	Placement string `json:"placement"`
	// Revision is the revision applied last.
	Revision      int64  `json:"revision,omitempty"`
	Generation    int64  `json:"generation"`
	ResourceIndex int64  `json:"resourceIndex"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
	// Clusters are the scheduled clusters, by name.
	Clusters []events.ClusterRollout `json:"clusters"`
}

// Apply applies one whole revision (its pieces in order) on top of p.
func (p *Progress) Apply(pieces []events.RolloutProgressedV2) error {
	if err := checkRevision(pieces); err != nil {
		return err
	}
	h := pieces[0]
	clusters := map[string]events.ClusterRollout{}
	if !h.Base {
		for _, c := range p.Clusters {
			clusters[c.Cluster] = c
		}
	}
	for _, piece := range pieces {
		for _, c := range piece.Clusters {
			if c.Removed {
				delete(clusters, c.Cluster)
			} else {
				clusters[c.Cluster] = c.Rollout()
			}
		}
	}
	list := make([]events.ClusterRollout, 0, len(clusters))
	for _, c := range clusters {
		list = append(list, c)
	}
	slices.SortFunc(list, func(a, b events.ClusterRollout) int { return strings.Compare(a.Cluster, b.Cluster) })
	*p = Progress{Placement: h.Placement, Revision: h.Revision, Generation: h.Generation, ResourceIndex: h.ResourceIndex,
		Reason: h.Reason, Message: h.Message, Clusters: list}
	if len(list) != h.ClusterCount {
		return fmt.Errorf("%w: progress revision %d of %s holds %d clusters, %d assembled", ErrMismatch, h.Revision, h.Placement, h.ClusterCount, len(list))
	}
	return nil
}

// Cluster returns the progress of one cluster, nil if it has none.
func (p *Progress) Cluster(name string) *events.ClusterRollout {
	if p == nil {
		return nil
	}
	if i, ok := search(p.Clusters, name, func(c events.ClusterRollout) string { return c.Cluster }); ok {
		return &p.Clusters[i]
	}
	return nil
}

// search finds name in a list sorted by name.
func search[T any](list []T, name string, key func(T) string) (int, bool) {
	i := sort.Search(len(list), func(i int) bool { return key(list[i]) >= name })
	return i, i < len(list) && key(list[i]) == name
}

func byName(list []events.ClusterDecision) map[string]events.ClusterDecision {
	m := make(map[string]events.ClusterDecision, len(list))
	for _, c := range list {
		m[c.Cluster] = c
	}
	return m
}

func sorted(m map[string]events.ClusterDecision) []events.ClusterDecision {
	if len(m) == 0 {
		return nil
	}
	list := make([]events.ClusterDecision, 0, len(m))
	for _, c := range m {
		list = append(list, c)
	}
	slices.SortFunc(list, func(a, b events.ClusterDecision) int { return strings.Compare(a.Cluster, b.Cluster) })
	return list
}

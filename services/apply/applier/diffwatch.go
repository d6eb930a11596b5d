package applier

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events/api"
)

// DiffTarget is a member object a ReportDiff placement compares with its
// manifest: a change to it changes the placement's diff report.
type DiffTarget struct {
	Placement string
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
}

// DiffTargets lists the objects of the placements whose apply strategy is
// ReportDiff, at most limit of them. They carry no Flotilla label (nothing is
// applied), so the label-selected informers do not see them; the worker
// watches each by name instead.
func (a *Applier) DiffTargets(limit int) []DiffTarget {
	a.mu.Lock()
	ps := make([]*placement, 0, len(a.placements))
	names := make([]string, 0, len(a.placements))
	for n, p := range a.placements {
		ps, names = append(ps, p), append(names, n)
	}
	a.mu.Unlock()
	var out []DiffTarget
	for i, p := range ps {
		p.mu.Lock()
		if p.work != nil && p.strategy.Type == api.ApplyStrategyTypeReportDiff {
			for _, t := range p.objects {
				if len(out) == limit {
					p.mu.Unlock()
					return out
				}
				if t.mapped && t.obj.Object != nil {
					ns := ""
					if t.namespaced {
						ns = t.obj.Object.GetNamespace()
					}
					out = append(out, DiffTarget{Placement: names[i], GVR: t.gvr, Namespace: ns, Name: t.obj.Object.GetName()})
				}
			}
		}
		p.mu.Unlock()
	}
	return out
}

package fold_test

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// namespace is the seed's selected resource.
var namespace = api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}

// placement is seed 000's web-2-crp with the given takeover mode.
func placement(mode api.WhenToTakeOverType) api.ClusterResourcePlacement {
	return api.ClusterResourcePlacement{
		ObjectMeta: metav1.ObjectMeta{Name: "web-2-crp"},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Group: "", Version: "v1", Kind: "Namespace",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-2"}}}},
			Policy:   &api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
			Strategy: api.RolloutStrategy{ApplyStrategy: &api.ApplyStrategy{WhenToTakeOver: mode}},
		},
	}
}

// world builds the inputs of a placement step by step.
type world struct {
	t  *testing.T
	in fold.Inputs
	// decisions and rollouts count the revisions applied; seq numbers reports.
	decisions, rollouts, seq int64
}

func newWorld(t *testing.T, crp api.ClusterResourcePlacement) *world {
	t.Helper()
	w := &world{t: t}
	if _, err := w.in.Upsert(crp, t0); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) gen() int64 { return w.in.Generation() }

// schedule decides the placement onto clusters (fulfilled).
func (w *world) schedule(clusters ...string) *world {
	d := events.PlacementScheduledV2{Placement: "web-2-crp", Generation: w.gen(), PlacementType: api.PickAllPlacementType, Fulfilled: true,
		ChosenCount: len(clusters)}
	for i, c := range clusters {
		d.Clusters = append(d.Clusters, events.ClusterDecision{Cluster: c, Action: events.ActionAdded, AffinityScore: int32(i), TopologySpreadScore: 0})
	}
	return w.decide(d)
}

// decide applies d as the next decision revision, a base of one piece.
func (w *world) decide(d events.PlacementScheduledV2) *world {
	w.t.Helper()
	w.decisions++
	d.Revision, d.Base, d.Piece, d.Pieces = w.decisions, true, 0, 1
	if err := w.in.ApplyDecision([]events.PlacementScheduledV2{d}); err != nil {
		w.t.Fatal(err)
	}
	return w
}

func (w *world) snapshot(index int64) *world {
	w.in.ApplySnapshot(&events.SnapshotCreated{Placement: "web-2-crp", Index: index, Hash: "sha256:1",
		SelectedResources: []api.ResourceIdentifier{namespace}})
	return w
}

// rollout reports the progress of the given clusters on the snapshot index.
func (w *world) rollout(index int64, clusters ...events.ClusterRollout) *world {
	p := events.RolloutProgressedV2{Placement: "web-2-crp", Generation: w.gen(), ResourceIndex: index, ClusterCount: len(clusters)}
	for _, c := range clusters {
		p.Clusters = append(p.Clusters, events.ClusterProgress{Cluster: c.Cluster, Started: c.Started, ResourceIndex: c.ResourceIndex,
			Reason: c.Reason, Message: c.Message, Stuck: c.Stuck, Overrides: c.Overrides})
	}
	return w.progress(p)
}

// progress applies p as the next progress revision, a base of one piece.
func (w *world) progress(p events.RolloutProgressedV2) *world {
	w.t.Helper()
	w.rollouts++
	p.Revision, p.Base, p.Piece, p.Pieces = w.rollouts, true, 0, 1
	if err := w.in.ApplyRollout([]events.RolloutProgressedV2{p}); err != nil {
		w.t.Fatal(err)
	}
	return w
}

func started(cluster string, index int64) events.ClusterRollout {
	return events.ClusterRollout{Cluster: cluster, Started: true, ResourceIndex: index}
}

func (w *world) report(r *events.WorkReported) *world {
	if r.Generation == 0 {
		r.Generation = w.gen()
	}
	if r.ObservedAt.IsZero() {
		r.ObservedAt = t0.Add(time.Minute)
	}
	w.seq++
	w.in.ApplyReport(r, w.seq)
	return w
}

func cond(status, reason, msg string) events.Condition {
	return events.Condition{Status: status, Reason: reason, Message: msg}
}

// applied is a report of the namespace applied and available on cluster.
func applied(cluster string, index int64) *events.WorkReported {
	return &events.WorkReported{
		Cluster: cluster, Placement: "web-2-crp", ResourceIndex: index,
		Manifests: []events.ManifestResult{{
			Resource:  namespace,
			Applied:   cond("True", "Applied", ""),
			Available: cond("True", "Available", ""),
		}},
		Applied:   cond("True", api.ApplySucceededReason, ""),
		Available: cond("True", api.AvailableReason, ""),
	}
}

// refused is a report of the namespace not applied on cluster for reason.
func refused(cluster string, index int64, reason string, name string) *events.WorkReported {
	r := &events.WorkReported{
		Cluster: cluster, Placement: "web-2-crp", ResourceIndex: index,
		Manifests: []events.ManifestResult{{
			Resource:  api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: name},
			Applied:   cond("False", reason, ""),
			Available: cond("Unknown", api.ManifestNotAvailableYetReason, ""),
		}},
		Applied:   cond("False", api.ApplyFailedReason, "1 manifest failed to apply"),
		Available: cond("Unknown", api.AvailableUnknownReason, ""),
	}
	return r
}

func (w *world) status(prev api.PlacementStatus, at time.Time) api.PlacementStatus {
	return fold.Status(&w.in, prev, at)
}

// conds renders conditions as "Type=Status/Reason" for compact comparison.
func conds(cs []metav1.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return out
}

func clusterStatus(t *testing.T, st api.PlacementStatus, cluster string) api.ResourcePlacementStatus {
	t.Helper()
	for _, p := range st.PlacementStatuses {
		if p.ClusterName == cluster {
			return p
		}
	}
	t.Fatalf("no placementStatuses entry for %s in %s", cluster, mustJSON(t, st))
	return api.ResourcePlacementStatus{}
}

func getCond(t *testing.T, cs []metav1.Condition, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(cs, typ)
	if c == nil {
		t.Fatalf("no %s condition in %v", typ, conds(cs))
	}
	return *c
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

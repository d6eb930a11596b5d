// Package fold turns the events that bear on a placement (its spec, the
// scheduler's decision, the resource snapshot, rollout progress and the apply
// workers' reports) into the Fleet-shaped ClusterResourcePlacement status, and
// member events into the MemberCluster status. It is pure: no I/O, no clock;
// the caller passes the time a change is stamped with.
package fold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
)

// Fleet's API group versions and kinds, as the status service serves them.
const (
	PlacementAPIVersion = "placement.kubernetes-fleet.io/v1beta1"
	PlacementKind       = "ClusterResourcePlacement"
	MemberAPIVersion    = "cluster.kubernetes-fleet.io/v1beta1"
	MemberKind          = "MemberCluster"
)

// Inputs is what the status of one placement is folded from: the placement as
// last upserted and the latest event of each kind that bears on it. Events
// arrive from several subjects and may be redelivered out of order, so each
// Apply method ignores an event older than what it already holds.
type Inputs struct {
	// Placement is the placement as last upserted, defaulted, with its
	// generation and creation time in metadata. Nil until the placement is
	// known (a decision or report may arrive first).
	Placement *api.ClusterResourcePlacement `json:"placement,omitempty"`
	// Deleted is set once the placement is deleted; Placement keeps its last spec.
	Deleted bool `json:"deleted,omitempty"`
	// SpecSeq is the stream sequence of the placement event (upserted or
	// deleted) that made Placement and Deleted what they are: an older one
	// delivered late changes nothing.
	SpecSeq int64 `json:"-"`
	// WorkGeneration is the generation at which what the apply workers are
	// sent besides the manifests (apply strategy, delete strategy,
	// unavailablePeriodSeconds) last changed, or the placement was
	// (re)created. Rollout progress and apply reports answering an older
	// generation describe superseded work (whenToTakeOver Never, say) and no
	// longer count; other spec changes leave them standing.
	WorkGeneration int64 `json:"workGeneration,omitempty"`

	// Decision and Rollout are assembled from the revisions in pieces of
	// the scheduler's decisions and the rollout's progress (state stored
	// from their v1 events reads as revision 0).
	Decision *revision.Decision      `json:"decision,omitempty"`
	Snapshot *events.SnapshotCreated `json:"snapshot,omitempty"`
	Rollout  *revision.Progress      `json:"rollout,omitempty"`
	// Reports holds the latest apply report of each cluster, and ReportSeqs
	// the stream sequence of each (0 for one stored before sequences were).
	Reports    map[string]*events.WorkReported `json:"-"`
	ReportSeqs map[string]int64                `json:"-"`
	// Quarantined holds, per cluster, work the rollout could not send it.
	Quarantined map[string]*Quarantine `json:"-"`
}

// Quarantine is a cluster's work that the outbox set aside, and which report the cluster
// had made then: a report on other work means newer work reached it.
type Quarantine struct {
	Notice           events.OutboxQuarantined
	ReportIndex      *int64
	ReportGeneration *int64
}

// ApplyQuarantine records a notice of work that could not be sent to its cluster; notices of
// other events do not bear on the status.
func (in *Inputs) ApplyQuarantine(n *events.OutboxQuarantined) bool {
	if n.Type != events.TypeWorkDesired || n.Cluster == "" {
		return false
	}
	q := &Quarantine{Notice: *n}
	if r := in.Reports[n.Cluster]; r != nil {
		q.ReportIndex, q.ReportGeneration = &r.ResourceIndex, &r.Generation
	}
	if in.Quarantined == nil {
		in.Quarantined = map[string]*Quarantine{}
	}
	in.Quarantined[n.Cluster] = q
	return true
}

// clearQuarantine forgets a cluster's quarantined work once the cluster reports on other
// work than it had then.
func (in *Inputs) clearQuarantine(r *events.WorkReported) {
	q := in.Quarantined[r.Cluster]
	if q == nil {
		return
	}
	if q.ReportIndex == nil || *q.ReportIndex != r.ResourceIndex || *q.ReportGeneration != r.Generation {
		delete(in.Quarantined, r.Cluster)
	}
}

// Generation is the placement's generation, 0 while it is unknown.
func (in *Inputs) Generation() int64 {
	if in.Placement == nil {
		return 0
	}
	return in.Placement.Generation
}

// Known reports whether the placement exists: upserted and not deleted.
func (in *Inputs) Known() bool {
	return in.Placement != nil && !in.Deleted
}

// Upsert records a placement as a user published it. The spec is defaulted;
// the generation starts at 1 and bumps when the spec changed or the placement
// had been deleted, which is how the scheduler counts, so decisions carry the
// same generations. It reports whether the generation changed. An update of
// a live placement that the Fleet rules refuse (api.ValidateSpecUpdate: the
// placement type changed, a toleration removed) returns an error wrapping
// ErrImmutable and changes nothing: the scheduler and the rollout refuse it
// too, so all three keep the same spec and count the same generations.
func (in *Inputs) Upsert(crp api.ClusterResourcePlacement, now time.Time) (bool, error) {
	api.SetDefaults(&crp)
	if prev := in.Placement; prev != nil && !in.Deleted {
		if errs := api.ValidateSpecUpdate(&prev.Spec, &crp.Spec); len(errs) > 0 {
			return false, fmt.Errorf("%w: placement %s: %w", ErrImmutable, crp.Name, errs)
		}
	}
	// The version the user wrote (v1beta1 or v1) is the one shown.
	version := crp.APIVersion
	if !api.IsFleetAPIVersion(version, api.PlacementGroupVersion.Group) {
		version = PlacementAPIVersion
	}
	crp.TypeMeta = metav1.TypeMeta{APIVersion: version, Kind: PlacementKind}
	crp.Status = api.PlacementStatus{}
	crp.ResourceVersion, crp.UID, crp.ManagedFields = "", "", nil
	crp.DeletionTimestamp = nil

	prev := in.Placement
	recreated := prev == nil || in.Deleted
	switch {
	case prev == nil:
		crp.Generation = 1
	case in.Deleted || !sameJSON(prev.Spec, crp.Spec):
		crp.Generation = prev.Generation + 1
	default:
		crp.Generation = prev.Generation
	}
	if recreated {
		crp.CreationTimestamp = metav1.NewTime(now.UTC())
	} else {
		crp.CreationTimestamp = prev.CreationTimestamp
	}
	if recreated || !sameJSON(workOf(&prev.Spec), workOf(&crp.Spec)) {
		in.WorkGeneration = crp.Generation
	}
	changed := prev == nil || prev.Generation != crp.Generation
	in.Placement = &crp
	in.Deleted = false
	return changed, nil
}

// workOf is what a placement's work carries besides the manifests, as the
// rollout keys it: a change resends the work and older reports no longer answer it.
func workOf(spec *api.PlacementSpec) any {
	var period *int
	if ru := spec.Strategy.RollingUpdate; ru != nil {
		period = ru.UnavailablePeriodSeconds
	}
	return struct {
		Apply  *api.ApplyStrategy
		Delete *api.DeleteStrategy
		Period *int
	}{spec.Strategy.ApplyStrategy, spec.Strategy.DeleteStrategy, period}
}

// ErrImmutable reports an update the Fleet rules refuse: it changes what
// cannot change (the placement type) or removes what can only be added (a
// toleration).
var ErrImmutable = errors.New("update refused")

// Delete records the placement's deletion. It reports whether anything changed.
func (in *Inputs) Delete(now time.Time) bool {
	if in.Placement == nil || in.Deleted {
		return false
	}
	in.Deleted = true
	t := metav1.NewTime(now.UTC())
	in.Placement.DeletionTimestamp = &t
	return true
}

// ApplyDecision applies one whole revision of the scheduler's decisions, as
// revision.Receive hands them over (in order, each once). An error wrapping
// revision.ErrMismatch is reported after the revision was applied.
func (in *Inputs) ApplyDecision(pieces []events.PlacementScheduledV2) error {
	return applyRevision(&in.Decision, pieces)
}

// ApplySnapshot records a resource snapshot unless a newer one is held.
func (in *Inputs) ApplySnapshot(s *events.SnapshotCreated) bool {
	if in.Snapshot != nil && s.Index < in.Snapshot.Index {
		return false
	}
	in.Snapshot = s
	return true
}

// ApplyRollout applies one whole revision of the rollout's progress, as
// revision.Receive hands them over (in order, each once). An error wrapping
// revision.ErrMismatch is reported after the revision was applied.
func (in *Inputs) ApplyRollout(pieces []events.RolloutProgressedV2) error {
	return applyRevision(&in.Rollout, pieces)
}

// applyRevision applies one whole revision to a copy of the state held (the
// zero state when none is) and holds the copy unless the revision failed with
// an error other than revision.ErrMismatch.
func applyRevision[S any, PS interface {
	*S
	Apply([]P) error
}, P any](held **S, pieces []P) error {
	var s S
	if *held != nil {
		s = **held
	}
	err := PS(&s).Apply(pieces)
	if err == nil || errors.Is(err, revision.ErrMismatch) {
		*held = &s
	}
	return err
}

// ApplyReport records a cluster's apply report, which has stream sequence
// seq, unless the one held is newer: ordered by the bus, not by the time the
// worker's clock gave it (a clock set back would hide every later report). A
// report answering a tombstone removes the cluster's report.
func (in *Inputs) ApplyReport(r *events.WorkReported, seq int64) bool {
	old := in.Reports[r.Cluster]
	if old != nil && seq <= in.ReportSeqs[r.Cluster] {
		return false
	}
	if r.Deleted {
		if old == nil {
			return false
		}
		delete(in.Reports, r.Cluster)
		delete(in.ReportSeqs, r.Cluster)
		return true
	}
	if in.Reports == nil {
		in.Reports = map[string]*events.WorkReported{}
	}
	if in.ReportSeqs == nil {
		in.ReportSeqs = map[string]int64{}
	}
	in.Reports[r.Cluster], in.ReportSeqs[r.Cluster] = r, seq
	in.clearQuarantine(r)
	return true
}

// Apply records one event payload (a pointer, as events.Decode returns it),
// which has stream sequence seq, and reports whether the inputs changed.
// Payloads that do not bear on a placement's status are ignored, and so are
// the revisions in pieces of decisions and progress: ApplyDecision and
// ApplyRollout take them whole.
//
// Late events lose: a placement upsert or deletion no newer than SpecSeq
// changes nothing, nor does a snapshot older than the one held (by index) or
// a report older than the cluster's (by sequence, see ApplyReport). An upsert taken
// records its sequence even when the spec is the same, so that every service
// skips the same late events.
func (in *Inputs) Apply(payload any, seq int64, now time.Time) (bool, error) {
	switch p := payload.(type) {
	case *events.PlacementUpserted:
		if seq <= in.SpecSeq {
			return false, nil
		}
		if _, err := in.Upsert(p.Placement, now); err != nil {
			return false, err
		}
		in.SpecSeq = seq
		return true, nil
	case *events.PlacementDeleted:
		if seq <= in.SpecSeq || !in.Delete(now) {
			return false, nil
		}
		in.SpecSeq = seq
		return true, nil
	case *events.SnapshotCreated:
		return in.ApplySnapshot(p), nil
	case *events.WorkReported:
		return in.ApplyReport(p, seq), nil
	case *events.OutboxQuarantined:
		return in.ApplyQuarantine(p), nil
	}
	return false, nil
}

// latestIndex is the newest resource snapshot index known, from the snapshot
// or from rollout progress (which may arrive first), and whether one is known.
func (in *Inputs) latestIndex() (int64, bool) {
	switch {
	case in.Snapshot != nil && in.Rollout != nil:
		return max(in.Snapshot.Index, in.Rollout.ResourceIndex), true
	case in.Snapshot != nil:
		return in.Snapshot.Index, true
	case in.Rollout != nil:
		return in.Rollout.ResourceIndex, true
	}
	return 0, false
}

// currentRollout returns the rollout progress if it answers the placement's
// current strategy and newest snapshot, else nil.
func (in *Inputs) currentRollout() *revision.Progress {
	r := in.Rollout
	if r == nil || r.Generation < in.WorkGeneration {
		return nil
	}
	if idx, ok := in.latestIndex(); ok && r.ResourceIndex < idx {
		return nil
	}
	return r
}

// currentReport returns the cluster's apply report if it answers the
// placement's current strategy and newest snapshot, else nil.
func (in *Inputs) currentReport(cluster string) *events.WorkReported {
	r := in.Reports[cluster]
	if r == nil || r.Generation < in.WorkGeneration {
		return nil
	}
	if idx, ok := in.latestIndex(); ok && r.ResourceIndex < idx {
		return nil
	}
	return r
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

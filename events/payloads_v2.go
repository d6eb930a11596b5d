package events

import (
	"slices"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Revisions in pieces.
//
// The v1 decision, rollout progress and status events listed every cluster,
// so at a few thousand members one event was over NATS's 1 MB limit. Their v2
// types carry the same facts in revisions:
//
//   - A producer numbers the revisions of one placement's state 1, 2, 3, ...
//     without gaps, in the order it commits them (under the placement's row
//     lock), and keeps counting across deletion and re-creation.
//   - A base revision lists every cluster of the state; a consumer drops the
//     clusters it held. Any other revision lists only the clusters that
//     changed since the revision before it, and applies on top of it.
//     Revision 1 is a base; a producer also makes a base whenever it is no
//     longer than the changes.
//   - A revision travels in Pieces events (at least one), numbered by Piece
//     from 0, each with at most MaxPieceClusters clusters in name order and
//     at most MaxPieceBytes of JSON, and each repeating the placement-wide
//     fields. So no event grows with the fleet: a revision of n clusters is
//     ⌈n/MaxPieceClusters⌉ pieces or more, and one cluster joining a fleet
//     of 5,000 is one small event.
//   - A consumer applies a revision once it holds all of its pieces and every
//     revision before it since the last base (package events/revision does
//     the bookkeeping). Pieces may arrive in any order and twice (replicas,
//     redeliveries); a piece of a revision at or below the one applied is
//     stale and ignored. A revision that stays incomplete while later ones
//     are complete is a lost piece: the consumer says so and waits, at worst
//     until the next base.
//
// The consumer's assembled state is its own (in its database, written in the
// transaction that consumes the piece with its inbox row), so a consumer that
// starts empty reaches the full state by reading the stream from its start,
// or from any base.

// Bounds of a piece.
const (
	// MaxPieceClusters bounds the clusters listed in one piece.
	MaxPieceClusters = 1000
	// MaxPieceBytes bounds the JSON of one piece's payload. With the
	// CloudEvent headers (well under 1 KiB) an event stays far below NATS's
	// default max_payload of 1 MiB.
	MaxPieceBytes = 256 << 10
	// MaxMessageBytes bounds every reason and message a piece carries, for
	// the placement and per cluster; producers cut longer text with Truncate.
	MaxMessageBytes = 1024
	// MaxNameBytes bounds the placement and cluster names (Kubernetes object
	// names; Fleet's placement and member names are at most 63).
	MaxNameBytes = 253
	// MaxConditions bounds the conditions of a placement or a cluster in a
	// status change (Fleet defines 7 per cluster, 8 per placement).
	MaxConditions = 16
)

// Part is where one piece stands in its producer's revisions of one placement.
type Part struct {
	Revision int64
	Base     bool
	Piece    int
	Pieces   int
}

// Truncate cuts s to at most n bytes, on a UTF-8 boundary, marking the cut
// with an ellipsis.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// PlacementScheduledV2 is one piece of one revision of a placement's
// scheduling decision: the clusters it is bound to, those it was removed
// from, and, for a PickN or PickFixed placement the scheduler could not
// fill, why others were not chosen. See "Revisions in pieces" above.
//
// Each cluster is listed with its Action: added or kept (chosen, with its
// scores), removed (no longer chosen, Reason says why; it leaves the state),
// or none (not chosen, Reason says why). A removed entry for a cluster that
// was not chosen only drops it from the not-chosen list. Not-chosen clusters
// are listed only as many as the policy wants and the decision lacks (the
// first by name; none for PickAll); the scheduler's history
// (scheduling_decisions) keeps the others.
//
// Size bound: at most MaxPieceClusters (1,000) clusters and MaxPieceBytes
// (256 KiB) of JSON per piece, whatever the size of the fleet (names of at
// most 253 bytes, reasons and the message of at most MaxMessageBytes).
// TestPiecesStayBoundedAt5000Clusters holds it.
type PlacementScheduledV2 struct {
	Placement string `json:"placement"`
	// Revision numbers the placement's decisions from 1 (see above); Base
	// says the revision lists every cluster of the decision.
	Revision int64 `json:"revision"`
	Base     bool  `json:"base,omitempty"`
	// Piece is this event's place among the revision's Pieces, from 0.
	Piece  int `json:"piece"`
	Pieces int `json:"pieces"`
	// Generation is the placement generation the decision answers.
	Generation    int64             `json:"generation"`
	PlacementType api.PlacementType `json:"placementType"`
	// Wanted is the number of clusters the policy asks for (0 for PickAll).
	Wanted int `json:"wanted"`
	// ChosenCount is how many clusters the whole decision chooses, for a
	// consumer to check what it assembled.
	ChosenCount int `json:"chosenCount"`
	// Fulfilled is false when fewer clusters than wanted were found; Message
	// then says how many were found and why others were rejected.
	Fulfilled bool   `json:"fulfilled"`
	Message   string `json:"message,omitempty"`
	// Clusters are this piece's clusters, sorted by name.
	Clusters []ClusterDecision `json:"clusters"`
}

// Part is the piece's place in the placement's decisions.
func (p PlacementScheduledV2) Part() Part {
	return Part{Revision: p.Revision, Base: p.Base, Piece: p.Piece, Pieces: p.Pieces}
}

// ClusterProgress is the rollout state of one placement on one cluster in a
// RolloutProgressedV2: ClusterRollout's fields, or Removed when the cluster
// is no longer scheduled and leaves the progress.
type ClusterProgress struct {
	Cluster string `json:"cluster"`
	Removed bool   `json:"removed,omitempty"`
	// Started is true once the cluster has been sent the placement's current
	// resource snapshot; Reason and Message say what holds it back otherwise.
	Started       bool   `json:"started,omitempty"`
	ResourceIndex int64  `json:"resourceIndex,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
	// Stuck is set when the cluster has not become applied and available
	// within the rollout deadline.
	Stuck bool `json:"stuck,omitempty"`
	// Overrides is what the placement's overrides did to the work of a
	// started cluster; nil when none applies there.
	Overrides *ClusterOverrides `json:"overrides,omitempty"`
}

// Rollout is the entry as the v1 progress listed it, with the overrides.
func (c ClusterProgress) Rollout() ClusterRollout {
	return ClusterRollout{Cluster: c.Cluster, Started: c.Started, ResourceIndex: c.ResourceIndex,
		Reason: c.Reason, Message: c.Message, Stuck: c.Stuck, Overrides: c.Overrides}
}

// Equal reports whether two entries say the same.
func (c ClusterProgress) Equal(o ClusterProgress) bool {
	a, b := c, o
	a.Overrides, b.Overrides = nil, nil
	return a == b && c.Overrides.Equal(o.Overrides)
}

// MaxListedOverrides bounds each list of applicable overrides of a cluster.
const MaxListedOverrides = 100

// ClusterOverrides is what a placement's overrides did to its work on one
// cluster: upstream's Overridden condition and its lists of applicable
// overrides.
//
// Size bound: at most MaxListedOverrides names in each list (names of at most
// MaxNameBytes), and Failed of at most MaxMessageBytes.
type ClusterOverrides struct {
	// ClusterResourceOverrides and ResourceOverrides name the override
	// snapshots applied to the cluster's work, as upstream names them
	// (<override>-<index>, index counting the override's changes from 0).
	ClusterResourceOverrides []string             `json:"clusterResourceOverrides,omitempty"`
	ResourceOverrides        []api.NamespacedName `json:"resourceOverrides,omitempty"`
	// Failed says why the overrides could not be applied on the cluster, such
	// as the patch and path that failed: the cluster was not sent the work.
	Failed string `json:"failed,omitempty"`
}

// Equal reports whether two outcomes say the same; nil is no override.
func (c *ClusterOverrides) Equal(o *ClusterOverrides) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Failed == o.Failed && slices.Equal(c.ClusterResourceOverrides, o.ClusterResourceOverrides) &&
		slices.Equal(c.ResourceOverrides, o.ResourceOverrides)
}

// RolloutProgressedV2 is one piece of one revision of the rollout progress of
// a placement's current snapshot: each scheduled cluster's state (a base) or
// the clusters whose state changed (see "Revisions in pieces" above).
//
// Size bound: at most MaxPieceClusters (1,000) clusters and MaxPieceBytes
// (256 KiB) of JSON per piece, whatever the size of the fleet (names of at
// most 253 bytes, reasons and messages of at most MaxMessageBytes).
// TestPiecesStayBoundedAt5000Clusters holds it.
type RolloutProgressedV2 struct {
	Placement string `json:"placement"`
	Revision  int64  `json:"revision"`
	Base      bool   `json:"base,omitempty"`
	Piece     int    `json:"piece"`
	Pieces    int    `json:"pieces"`

	Generation    int64 `json:"generation"`
	ResourceIndex int64 `json:"resourceIndex"`
	// Reason and Message report a problem of the whole placement, such as
	// InvalidResourceSelectors, also when no cluster is scheduled.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ClusterCount is how many clusters the whole progress holds (the
	// scheduled ones), for a consumer to check what it assembled.
	ClusterCount int `json:"clusterCount"`
	// Clusters are this piece's clusters, sorted by name.
	Clusters []ClusterProgress `json:"clusters"`
}

// Part is the piece's place in the placement's progress revisions.
func (p RolloutProgressedV2) Part() Part {
	return Part{Revision: p.Revision, Base: p.Base, Piece: p.Piece, Pieces: p.Pieces}
}

// ClusterStatus is the new status of one placement on one cluster in a
// PlacementStatusChangedV2: its conditions, the resource index it observed
// and how many objects fail, drifted or differ there (the lists themselves
// are in the placement's status: fleetctl get). Removed says the cluster
// left the placement's status.
type ClusterStatus struct {
	Cluster               string             `json:"cluster"`
	Removed               bool               `json:"removed,omitempty"`
	ObservedResourceIndex string             `json:"observedResourceIndex,omitempty"`
	Conditions            []metav1.Condition `json:"conditions,omitempty"`
	FailedPlacements      int                `json:"failedPlacements,omitempty"`
	DriftedPlacements     int                `json:"driftedPlacements,omitempty"`
	DiffedPlacements      int                `json:"diffedPlacements,omitempty"`
}

// PlacementStatusChangedV2 is one piece of one change of a placement's
// Fleet-shaped status: the placement-wide conditions and counts as they are
// now, and the clusters whose entry in placementStatuses changed, to what.
// Revisions number the changes from 1 and pieces split one as above, but
// there is no base: a watcher wanting the whole status asks the status
// service (fleetctl get), and the events tell it what changed since.
//
// Size bound: at most MaxPieceClusters (1,000) clusters and MaxPieceBytes
// (256 KiB) of JSON per piece, whatever the size of the fleet (at most
// MaxConditions conditions each, messages of at most MaxMessageBytes).
// TestPiecesStayBoundedAt5000Clusters holds it.
type PlacementStatusChangedV2 struct {
	Placement string `json:"placement"`
	Revision  int64  `json:"revision"`
	Piece     int    `json:"piece"`
	Pieces    int    `json:"pieces"`

	// Generation is the placement's metadata.generation.
	Generation int64 `json:"generation"`
	// Deleted says the placement was deleted; the rest is its last status.
	Deleted               bool   `json:"deleted,omitempty"`
	ObservedResourceIndex string `json:"observedResourceIndex,omitempty"`
	// SelectedResourceCount is the length of status.selectedResources.
	SelectedResourceCount int `json:"selectedResourceCount"`
	// Conditions are the placement-wide conditions, all of them.
	Conditions []metav1.Condition `json:"conditions"`
	// ClusterCount is the length of status.placementStatuses.
	ClusterCount int `json:"clusterCount"`
	// Clusters are this piece's changed clusters, sorted by name.
	Clusters []ClusterStatus `json:"clusters"`
}

// Part is the piece's place in the placement's status changes.
func (p PlacementStatusChangedV2) Part() Part {
	return Part{Revision: p.Revision, Piece: p.Piece, Pieces: p.Pieces}
}

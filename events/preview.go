package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Placement preview (fleetctl apply --dry-run=server). Three request-replies,
// each answered by the service that owns that part of the decision and none
// of them changing anything (no event, no row, no member object):
//
//   - PreviewSchedulingSubject, answered by the scheduler: where a placement
//     would go under its policy against the live member set, with scores and
//     why each other member would not be chosen.
//   - PreviewRolloutSubject, answered by the rollout: what the placement
//     would select (the hub store with the file's objects laid over it), the
//     manifests of each cluster after overrides, and the rollout plan.
//   - PreviewMemberSubject(cluster), answered by that member's apply worker
//     only: what applying those manifests would do to each object, found by
//     server-side dry run on the member. The reply goes to PreviewReplyPrefix
//     of that member (under its own inbox prefix): a worker may publish its
//     preview answers there and nowhere else (deploy/kubernetes/member.sh).
//
// Requests are JSON; replies are a QueryReply of the result, in bounded
// pieces exactly as query replies (events/query.go, events/reply).
const (
	PreviewSchedulingSubject = "flotilla.preview.scheduling"
	PreviewRolloutSubject    = "flotilla.preview.rollout"
	// previewMemberPrefix is followed by the member's name as a subject token.
	previewMemberPrefix = "flotilla.preview.member."
	// previewReplyToken follows a member's inbox prefix in its preview replies.
	previewReplyToken = "preview"

	// PreviewMaxManifests bounds the manifests of one member request, as
	// the rollout bounds a snapshot.
	PreviewMaxManifests = 10000
)

// PreviewMemberSubject is where cluster's apply worker takes preview requests:
// flotilla.preview.member.<cluster>.
func PreviewMemberSubject(cluster string) (string, error) {
	tok, err := bus.SubjectToken(cluster)
	if err != nil {
		return "", fmt.Errorf("preview subject: %w", err)
	}
	return previewMemberPrefix + tok, nil
}

// PreviewReplyPrefix is the prefix of the reply subjects of cluster's preview
// answers: _INBOX.apply-<cluster>.preview. A requester adds one token of its
// own; the worker answers nothing else.
func PreviewReplyPrefix(cluster string) (string, error) {
	inbox, err := bus.MemberInboxPrefix(cluster)
	if err != nil {
		return "", fmt.Errorf("preview reply subject: %w", err)
	}
	return inbox + "." + previewReplyToken, nil
}

// CheckPreviewReply says whether reply is a subject cluster's worker may
// answer a preview on: its PreviewReplyPrefix and exactly one more token.
func CheckPreviewReply(cluster, reply string) error {
	prefix, err := PreviewReplyPrefix(cluster)
	if err != nil {
		return err
	}
	rest, ok := strings.CutPrefix(reply, prefix+".")
	if !ok || rest == "" || strings.ContainsAny(rest, ".*> \t") {
		return fmt.Errorf("reply subject %q is not under %s.<token>: a member answers previews on its own inbox only", reply, prefix)
	}
	return nil
}

// SchedulingPreviewRequest asks where a placement would go now.
type SchedulingPreviewRequest struct {
	Placement api.ClusterResourcePlacement `json:"placement"`
}

// SchedulingPreview is the scheduler's answer: the decision it would make.
type SchedulingPreview struct {
	Placement string `json:"placement"`
	// Fulfilled, Reason and Message are the Scheduled condition's.
	Fulfilled bool   `json:"fulfilled"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	// Chosen are sorted by name; Action is added or kept (kept: the
	// placement is there already and scheduling is sticky).
	Chosen []PreviewChosen `json:"chosen"`
	// NotChosen is every other member and why (or, for PickFixed, every
	// named cluster not chosen); Removed those the placement would leave.
	NotChosen []PreviewNotChosen `json:"notChosen,omitempty"`
	Removed   []PreviewNotChosen `json:"removed,omitempty"`
}

// PreviewChosen is a cluster the placement would go to, with its scores.
type PreviewChosen struct {
	Cluster             string `json:"cluster"`
	Action              string `json:"action"`
	AffinityScore       int32  `json:"affinityScore"`
	TopologySpreadScore int32  `json:"topologySpreadScore"`
}

// PreviewNotChosen is a cluster the placement would not go to, and why.
type PreviewNotChosen struct {
	Cluster string `json:"cluster"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// RolloutPreviewRequest asks what a placement would put on clusters: Objects
// are the hub manifests of the file being previewed, laid over the hub store
// (same identity: the file's wins), and Overrides its overrides.
type RolloutPreviewRequest struct {
	Placement api.ClusterResourcePlacement `json:"placement"`
	Clusters  []string                     `json:"clusters"`
	Objects   []json.RawMessage            `json:"objects,omitempty"`
	// Overrides are the file's overrides, laid over the live ones (same
	// kind, namespace and name: the file's).
	Overrides []OverrideUpserted `json:"overrides,omitempty"`
}

// RolloutPreview is the rollout's answer.
type RolloutPreview struct {
	Placement string `json:"placement"`
	// Resources are the selected objects.
	Resources []api.ResourceIdentifier `json:"resources"`
	// Clusters are in name order: the manifests each would get.
	Clusters []ClusterRender `json:"clusters"`
	Plan     RolloutPlan     `json:"plan"`
}

// ClusterRender is what one cluster would get: its manifests after
// overrides, the overrides applied, or why the overrides fail there.
type ClusterRender struct {
	Cluster   string            `json:"cluster"`
	Manifests []json.RawMessage `json:"manifests,omitempty"`
	Overrides []string          `json:"overrides,omitempty"`
	Error     string            `json:"error,omitempty"`
	// ApplyStrategy is what the member applies the manifests with.
	ApplyStrategy api.ApplyStrategy `json:"applyStrategy"`
}

// RolloutPlan is the order in which the clusters would get the placement.
type RolloutPlan struct {
	// Type is RollingUpdate or External.
	Type           string `json:"type"`
	MaxUnavailable int    `json:"maxUnavailable,omitempty"`
	MaxSurge       int    `json:"maxSurge,omitempty"`
	// Batches are RollingUpdate's steps, each starting once the one before
	// is available; Stages those of a staged update run (External).
	Batches []RolloutBatch `json:"batches,omitempty"`
	Stages  []RolloutBatch `json:"stages,omitempty"`
	// Waiting maps clusters that no step reaches to why.
	Waiting map[string]string `json:"waiting,omitempty"`
	// Note says what the plan assumes or why there is none.
	Note string `json:"note,omitempty"`
}

// RolloutBatch is one step: a batch number or stage name and its clusters,
// each with what happens there (add, update, remove).
type RolloutBatch struct {
	Name     string          `json:"name"`
	Clusters []PlannedAction `json:"clusters"`
}

// PlannedAction is what one step does to one cluster.
type PlannedAction struct {
	Cluster string `json:"cluster"`
	Action  string `json:"action"`
}

// MemberPreviewRequest asks a member's apply worker what applying manifests
// for a placement would do there.
type MemberPreviewRequest struct {
	Cluster       string            `json:"cluster"`
	Placement     string            `json:"placement"`
	Manifests     []json.RawMessage `json:"manifests"`
	ApplyStrategy api.ApplyStrategy `json:"applyStrategy"`
}

// Object outcomes of a member preview.
const (
	PreviewCreate          = "Create"
	PreviewUpdate          = "Update"
	PreviewTakeOver        = "TakeOver"
	PreviewRefusedTakeOver = "RefusedTakeOver"
	PreviewNoChange        = "NoChange"
	PreviewDelete          = "Delete"
	PreviewDrift           = "Drift"
	PreviewDiff            = "Diff" // ReportDiff: the member object differs (nothing is applied)
	PreviewError           = "Error"
)

// MemberPreview is a worker's answer.
type MemberPreview struct {
	Cluster string          `json:"cluster"`
	Objects []ObjectPreview `json:"objects"`
}

// ObjectPreview is what would happen to one object: Outcome, the differences
// (member value against hub value) and a message (why a takeover is refused,
// what failed).
type ObjectPreview struct {
	api.ResourceIdentifier `json:",inline"`
	Outcome                string            `json:"outcome"`
	Diffs                  []api.PatchDetail `json:"diffs,omitempty"`
	Message                string            `json:"message,omitempty"`
}

// DecodeMemberPreviewRequest decodes and checks a member preview request: it
// must be for cluster (the worker that received it) and within bounds.
func DecodeMemberPreviewRequest(cluster string, data []byte) (*MemberPreviewRequest, error) {
	var r MemberPreviewRequest
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("preview request: %w", err)
	}
	var errs []error
	if r.Cluster != cluster {
		errs = append(errs, fmt.Errorf("cluster: the request is for %q, this worker is %q", r.Cluster, cluster))
	}
	if _, err := bus.SubjectToken(r.Placement); err != nil {
		errs = append(errs, fmt.Errorf("placement: %w", err))
	}
	if len(r.Manifests) > PreviewMaxManifests {
		errs = append(errs, fmt.Errorf("manifests: %d, over the bound of %d", len(r.Manifests), PreviewMaxManifests))
	}
	for i, m := range r.Manifests {
		if !json.Valid(m) || len(m) == 0 || m[0] != '{' {
			errs = append(errs, fmt.Errorf("manifests[%d]: not a JSON object", i))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("preview request: %w", err)
	}
	return &r, nil
}

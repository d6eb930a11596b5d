package api

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FlotillaPrefix prefixes Flotilla's own annotations: they are not Fleet's, so a
// placement carrying them is still valid Fleet YAML.
const FlotillaPrefix = "flotilla.dev/"

// Failover annotations of a ClusterResourcePlacement.
const (
	// FailoverAfterAnnotation is how long a member the placement is on may be down
	// (its heartbeats say its API server is unreachable, or none arrived for 1.5
	// heartbeat periods) before it is lost, e.g. "30s". Without it the scheduler's
	// --failover-after applies.
	FailoverAfterAnnotation = FlotillaPrefix + "failover-after"
	// FailbackAfterAnnotation turns failback on: a PickN placement that failed over
	// returns to the original member once that member has been healthy this long.
	FailbackAfterAnnotation = FlotillaPrefix + "failback-after"
)

// FailoverConditionType is the per-cluster condition that says what failover did
// on the cluster and why. It is Flotilla's own: Fleet has no failover.
const FailoverConditionType = "Failover"

// Reasons of the per-cluster Failover condition.
const (
	// ClusterLostReason: the member has been down longer than the grace period. A
	// PickN placement moves away (its copy there stays until the replacement is
	// available and the member is back); PickAll and PickFixed wait for it.
	ClusterLostReason = "ClusterLost"
	// NoFailoverReplacementReason: the member is lost but no other cluster fits.
	NoFailoverReplacementReason = "NoFailoverReplacement"
	// FailoverReplacementScheduledReason: the cluster replaces a lost one; not available yet.
	FailoverReplacementScheduledReason = "FailoverReplacementScheduled"
	// FailedOverReason: the replacement is available.
	FailedOverReason = "FailedOver"
	// LostClusterReturnedReason: the lost member is back; its copy is removed once
	// the placement is available on its replacement.
	LostClusterReturnedReason = "LostClusterReturned"
	// FailbackScheduledReason: the original member has been healthy for the
	// failback period and is chosen again; not available yet.
	FailbackScheduledReason = "FailbackScheduled"
	// FailedBackReason: the placement is available on the original member again.
	FailedBackReason = "FailedBack"
	// FailbackReleasedReason: the replacement the placement leaves after a failback;
	// its copy is removed once the original member is available.
	FailbackReleasedReason = "FailbackReleased"
)

// FailoverSettings are a placement's failover annotations; zero means unset.
type FailoverSettings struct {
	After         time.Duration
	FailbackAfter time.Duration
}

// Failover reads a placement's failover annotations. A bad value is an error
// with the annotation's field path.
func Failover(crp *ClusterResourcePlacement) (FailoverSettings, ErrorList) {
	var (
		p  problems
		fs FailoverSettings
	)
	path := field.NewPath("metadata", "annotations")
	read := func(key string, into *time.Duration) {
		v, ok := crp.Annotations[key]
		if !ok {
			return
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			p.add(ErrorTypeInvalid, path.Key(key), "%q is not a duration (e.g. \"30s\", \"5m\")", v)
		case d <= 0:
			p.add(ErrorTypeInvalid, path.Key(key), "%q must be positive", v)
		default:
			*into = d
		}
	}
	read(FailoverAfterAnnotation, &fs.After)
	read(FailbackAfterAnnotation, &fs.FailbackAfter)
	return fs, p.list
}

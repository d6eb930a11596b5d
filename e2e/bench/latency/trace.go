package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// tracer records when each Flotilla event crosses the bus, to say where the time of a
// placement goes. JetStream delivers what it stores to plain subscribers on the subject
// too, so one subscription to flotilla.> sees every event as it is published.
type tracer struct {
	sub *nats.Subscription

	mu      sync.Mutex
	events  []traced
	changed chan struct{} // closed on the next status event (wake)
	// statuses are the placements as their status events tell them.
	statuses map[string]*statusView
}

// traced is one event as the benchmark saw it.
type traced struct {
	at      time.Time
	typ     string
	subject string
	payload any // the decoded payload; nil for work.desired, whose manifests are dropped
	// work names the cluster and snapshot of a work.desired event.
	cluster string
	index   int64
	// status is the placement as the status events up to this one tell it.
	status *api.ClusterResourcePlacement
}

func startTracer(nc *nats.Conn) (*tracer, error) {
	t := &tracer{changed: make(chan struct{}), statuses: map[string]*statusView{}}
	sub, err := nc.Subscribe("flotilla.>", t.handle)
	if err != nil {
		return nil, fmt.Errorf("trace the bus: %w", err)
	}
	// A missed status event would leave the placement as the events tell it wrong;
	// do not let a slow decode drop any.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("trace the bus: %w", err)
	}
	t.sub = sub
	return t, nil
}

func (t *tracer) handle(msg *nats.Msg) {
	at := time.Now()
	if strings.HasPrefix(msg.Subject, "flotilla.member.") || strings.HasPrefix(msg.Subject, "$") {
		return // heartbeats
	}
	ev, err := bus.Decode(msg)
	if err != nil {
		return // not an event (a query, a dead letter's copy)
	}
	rec := traced{at: at, typ: ev.Type(), subject: msg.Subject}
	payload, err := events.Decode(ev)
	if err != nil {
		return
	}
	switch p := payload.(type) {
	case *events.WorkDesired:
		rec.cluster, rec.index = p.Cluster, p.ResourceIndex
	case *events.WorkReported, *events.SnapshotCreated,
		*events.PlacementScheduledV2, *events.PlacementUpserted, *events.HubResourceUpserted, *events.RolloutProgressedV2:
		rec.payload = payload
	case *events.PlacementStatusChangedV2:
		rec.payload = payload
	default:
		return
	}
	t.mu.Lock()
	if p, ok := payload.(*events.PlacementStatusChangedV2); ok {
		v := t.statuses[p.Placement]
		if v == nil {
			v = &statusView{clusters: map[string]events.ClusterStatus{}}
			t.statuses[p.Placement] = v
		}
		rec.status = v.apply(p)
		close(t.changed)
		t.changed = make(chan struct{})
	}
	t.events = append(t.events, rec)
	t.mu.Unlock()
}

// since returns the events seen from t0 on.
func (t *tracer) since(t0 time.Time) []traced {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []traced
	for _, e := range t.events {
		if !e.at.Before(t0) {
			out = append(out, e)
		}
	}
	return out
}

// wake is closed when the next status event arrives: only then can a query of the
// status service answer something new. Waking on every event would query it some 40
// times in a new placement's window, and the queries would take the CPU the services
// need.
func (t *tracer) wake() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

func (t *tracer) stop() {
	if t.sub != nil {
		_ = t.sub.Unsubscribe()
	}
}

// first returns the time of the first event from t0 on that matches, and whether there is one.
func first(evs []traced, match func(traced) bool) (time.Time, bool) {
	for _, e := range evs {
		if match(e) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// perCluster returns, for each cluster in order of arrival, the first matching event's time.
func perCluster(evs []traced, match func(traced) (string, bool)) []time.Time {
	seen := map[string]bool{}
	var out []time.Time
	for _, e := range evs {
		if c, ok := match(e); ok && !seen[c] {
			seen[c] = true
			out = append(out, e.at)
		}
	}
	return out
}

// placementToken returns the last token of a subject that starts with prefix (the placement
// of a work or work-status subject), or "" for another subject.
func placementToken(subject string, prefix string) string {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return ""
	}
	// The placement is the last token.
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		return rest[i+1:]
	}
	return rest
}

// statusView puts a placement's status back together from its status events,
// which carry the placement-wide conditions and the clusters that changed.
// The bench's placements are new, so their first event lists every cluster.
type statusView struct {
	last     events.PlacementStatusChangedV2
	clusters map[string]events.ClusterStatus
}

// apply takes in one status event and returns the placement as it stands:
// its generation, conditions, observed index, a placementStatuses entry per
// cluster (conditions and observed index) and as many selectedResources as
// the event counts (their identities do not travel).
func (v *statusView) apply(p *events.PlacementStatusChangedV2) *api.ClusterResourcePlacement {
	v.last = *p
	for _, c := range p.Clusters {
		if c.Removed {
			delete(v.clusters, c.Cluster)
		} else {
			v.clusters[c.Cluster] = c
		}
	}
	crp := &api.ClusterResourcePlacement{}
	crp.Name, crp.Generation = p.Placement, p.Generation
	crp.Status.Conditions = p.Conditions
	crp.Status.ObservedResourceIndex = p.ObservedResourceIndex
	crp.Status.SelectedResources = make([]api.ResourceIdentifier, p.SelectedResourceCount)
	for _, name := range slices.Sorted(maps.Keys(v.clusters)) {
		c := v.clusters[name]
		crp.Status.PlacementStatuses = append(crp.Status.PlacementStatuses, api.ResourcePlacementStatus{
			ClusterName: name, ObservedResourceIndex: c.ObservedResourceIndex, Conditions: c.Conditions})
	}
	return crp
}

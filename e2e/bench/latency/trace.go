package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// tracer records when each Flotilla event crosses the bus, to say where the time of a
// placement goes. JetStream delivers what it stores to plain subscribers on the subject
// too, so one subscription to flotilla.> sees every event as it is published.
type tracer struct {
	sub *nats.Subscription

	mu      sync.Mutex
	events  []traced
	changed chan struct{}
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
}

func startTracer(nc *nats.Conn) (*tracer, error) {
	t := &tracer{changed: make(chan struct{})}
	sub, err := nc.Subscribe("flotilla.>", t.handle)
	if err != nil {
		return nil, fmt.Errorf("trace the bus: %w", err)
	}
	// Status events carry whole placements; do not let a slow decode drop any.
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
	case *events.WorkReported, *events.PlacementStatusChanged, *events.SnapshotCreated,
		*events.PlacementScheduled, *events.PlacementUpserted, *events.HubResourceUpserted, *events.RolloutProgressed:
		rec.payload = payload
	default:
		return
	}
	t.mu.Lock()
	t.events = append(t.events, rec)
	close(t.changed)
	t.changed = make(chan struct{})
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

// wake is closed when the next event arrives.
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

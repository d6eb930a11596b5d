// Package metrics holds the Prometheus metrics every Flotilla service serves on
// its health port (/metrics): what happens to events on the bus (Bus, a
// bus.Observer), the outbox's backlog and the consumers' lag (read when
// scraped), and helpers for the metrics of one service.
//
// Names follow the Prometheus conventions: the flotilla_ prefix, _total for
// counters, _seconds for durations, base units. Each service instance has a
// registry of its own (service.Open makes it), so tests that run several
// services in one process do not collide; the standalone passes one registry
// to every service it runs, and each service's metrics carry a service label.
package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Namespace prefixes every Flotilla metric.
const Namespace = "flotilla"

// Register registers c with reg and returns it; when a collector that
// describes the same metrics is registered already (a service started again
// on the same registry), it returns that one instead. A metric of the same
// name that disagrees on its labels or help is a programming error: it panics,
// as prometheus.MustRegister does.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("register metrics: %v", err))
}

// LatencyBuckets are the histogram buckets of handling and applying, in
// seconds: from a millisecond to about two minutes.
var LatencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 18)

// Bus counts what happens to events on the bus, by event type and consumer.
// It is the bus.Observer of a service's consumers and publishers.
type Bus struct {
	published    *prometheus.CounterVec
	consumed     *prometheus.CounterVec
	retried      *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	handling     *prometheus.HistogramVec
}

var _ bus.Observer = (*Bus)(nil)

// NewBus registers the bus metrics with reg.
func NewBus(reg prometheus.Registerer) *Bus {
	byType := []string{"consumer", "type"}
	return &Bus{
		published: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_published_total",
			Help: "Events the service put on the bus, by type: its own, or for a hub service what its outbox relay published " +
				"from the outbox all hub services share (sum by type over them for what they emitted).",
		}, []string{"type"})),
		consumed: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_consumed_total",
			Help: "Events a consumer handled and acknowledged, by consumer and type.",
		}, byType)),
		retried: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_retried_total",
			Help: "Deliveries a consumer failed to handle and handed back for a later retry, by consumer and type.",
		}, byType)),
		deadLettered: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_dead_lettered_total",
			Help: "Events a consumer could never handle and sent to the dead-letter stream, by consumer and type.",
		}, byType)),
		handling: Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "event_handler_duration_seconds",
			Help:    "Time of each handler call an event went through, by consumer and type (the events of a batch each count the batch's time).",
			Buckets: LatencyBuckets,
		}, byType)),
	}
}

// Watch starts the failure counters of consumer at zero for every event type
// (and UnknownType), so that the first retry or dead letter shows as an
// increase (Prometheus' increase() cannot see a series' first value).
func (b *Bus) Watch(consumer string) {
	for t := range knownTypes {
		b.retried.WithLabelValues(consumer, t)
		b.deadLettered.WithLabelValues(consumer, t)
	}
	b.retried.WithLabelValues(consumer, UnknownType)
	b.deadLettered.WithLabelValues(consumer, UnknownType)
}

// Published counts an event published.
func (b *Bus) Published(eventType string) {
	b.published.WithLabelValues(TypeLabel(eventType)).Inc()
}

// Handled observes a handler call's time.
func (b *Bus) Handled(consumer, eventType string, took time.Duration) {
	b.handling.WithLabelValues(consumer, TypeLabel(eventType)).Observe(took.Seconds())
}

// Settled counts a delivery by how it ended.
func (b *Bus) Settled(consumer, eventType string, outcome bus.Outcome) {
	var c *prometheus.CounterVec
	switch outcome {
	case bus.Acked:
		c = b.consumed
	case bus.Retried:
		c = b.retried
	case bus.DeadLettered:
		c = b.deadLettered
	default:
		return
	}
	c.WithLabelValues(consumer, TypeLabel(eventType)).Inc()
}

// UnknownType labels events whose type is not in the catalogue.
const UnknownType = "unknown"

var knownTypes = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range events.Types() {
		m[t] = true
	}
	return m
}()

// TypeLabel is the type label of an event type: the type when the catalogue
// knows it, else UnknownType. Anyone who may publish chooses the type of what
// a consumer dead-letters; labelling by it as sent would let them grow the
// metrics without bound.
func TypeLabel(eventType string) string {
	if knownTypes[eventType] {
		return eventType
	}
	return UnknownType
}

package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-dev/flotilla/platform/outbox"
)

// scrapeTimeout bounds what one collector may spend reading its values.
const scrapeTimeout = 5 * time.Second

// Gauges is a collector of gauges read when scraped: read returns their
// values in the order of descs. A read that fails reports the error for each
// gauge (the endpoint serves the other metrics and logs it).
type Gauges struct {
	descs []*prometheus.Desc
	read  func(ctx context.Context) ([]float64, error)
}

// NewGauges describes gauges read by read when scraped.
func NewGauges(read func(ctx context.Context) ([]float64, error), descs ...*prometheus.Desc) *Gauges {
	return &Gauges{descs: descs, read: read}
}

// Describe implements prometheus.Collector.
func (g *Gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range g.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g *Gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	values, err := g.read(ctx)
	if err == nil && len(values) != len(g.descs) {
		err = fmt.Errorf("read %d values for %d gauges", len(values), len(g.descs))
	}
	for i, d := range g.descs {
		if err != nil {
			ch <- prometheus.NewInvalidMetric(d, err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, values[i])
	}
}

// NewConsumerLag reads a durable consumer's backlog from JetStream (its
// consumer info) when scraped: the messages not delivered yet (num_pending),
// and those delivered and not acknowledged yet (num_ack_pending).
func NewConsumerLag(js jetstream.JetStream, stream, consumer string) *Gauges {
	labels := prometheus.Labels{"stream": stream, "consumer": consumer}
	return NewGauges(func(ctx context.Context) ([]float64, error) {
		c, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			return nil, fmt.Errorf("consumer %s/%s: %w", stream, consumer, err)
		}
		info := c.CachedInfo()
		return []float64{float64(info.NumPending), float64(info.NumAckPending)}, nil
	},
		prometheus.NewDesc(Namespace+"_consumer_pending_messages",
			"Messages of the stream the durable consumer has not delivered yet (JetStream num_pending): its lag.", nil, labels),
		prometheus.NewDesc(Namespace+"_consumer_ack_pending_messages",
			"Messages the durable consumer delivered that are not acknowledged yet (JetStream num_ack_pending).", nil, labels),
	)
}

// NewOutboxBacklog reads the outbox's backlog (outbox.ReadBacklog) when
// scraped. The outbox is one table for every hub service of a database, so its
// gauges are the same in each service that serves them.
func NewOutboxBacklog(q outbox.Querier) *Gauges {
	return NewGauges(func(ctx context.Context) ([]float64, error) {
		b, err := outbox.ReadBacklog(ctx, q)
		if err != nil {
			return nil, err
		}
		return []float64{float64(b.Rows), b.Oldest.Seconds()}, nil
	},
		prometheus.NewDesc(Namespace+"_outbox_pending_events",
			"Events in the outbox waiting to be published (quarantined ones left out): its depth.", nil, nil),
		prometheus.NewDesc(Namespace+"_outbox_oldest_pending_age_seconds",
			"How long the oldest event waiting in the outbox has waited; 0 when none waits.", nil, nil),
	)
}

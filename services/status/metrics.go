package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/platform/metrics"
	"github.com/flotilla-dev/flotilla/platform/pipeline"
)

// placementMetrics are the status service's own metrics: placements by
// condition (read from the database when scraped) and the time from a
// placement's generation to Available.
type placementMetrics struct {
	toAvailable prometheus.Histogram

	mu sync.Mutex
	// pending holds the times to Available observed by the transaction in
	// progress; they count once it commits (see commit).
	pending []time.Duration
}

// ToAvailableBuckets are the buckets of the time to Available, in seconds:
// from a tenth of a second to about three hours.
var ToAvailableBuckets = prometheus.ExponentialBuckets(0.1, 2, 17)

func newPlacementMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) *placementMetrics {
	metrics.Register(reg, newConditionGauge(pool))
	metrics.Register(reg, newWaitingGauges(pool))
	return &placementMetrics{
		toAvailable: metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "placement_time_to_available_seconds",
			Help: "Time from the event that brought a placement's generation (its upsert) to the event that made the " +
				"placement Available at that generation; each generation counts once.",
			Buckets: ToAvailableBuckets,
		})),
	}
}

// conditionsQuery counts the live placements by the status of each of their
// placement-wide conditions.
const conditionsQuery = `
	select c->>'type', c->>'status', count(*)
	from placement_status s
	join status_placements p on p.name = s.placement and not p.deleted
	cross join jsonb_array_elements(case jsonb_typeof(s.conditions) when 'array' then s.conditions else '[]' end) c
	group by 1, 2`

// conditionGauge reads flotilla_placements when scraped.
type conditionGauge struct {
	pool *pgxpool.Pool
	desc *prometheus.Desc
}

func newConditionGauge(pool *pgxpool.Pool) *conditionGauge {
	return &conditionGauge{pool: pool, desc: prometheus.NewDesc(metrics.Namespace+"_placements",
		"Placements (not deleted) by the status of each placement-wide condition (ClusterResourcePlacementScheduled, ...Available, ...).",
		[]string{"condition", "status"}, nil)}
}

func (g *conditionGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *conditionGauge) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := g.pool.Query(ctx, conditionsQuery)
	if err == nil {
		var condition, status string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&condition, &status, &n}, func() error {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n), condition, status)
			return nil
		})
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.desc, fmt.Errorf("count placements by condition: %w", err))
	}
}

// waitingQuery reads the live placements not Available at their current
// generation yet, and how long the one that came first has waited. A
// placement whose apply strategy is ReportDiff is never Available (it reports
// diffs, it applies nothing) and is left out.
const waitingQuery = `
	select count(*), coalesce(extract(epoch from now() - min(generation_at)), 0)::float8
	from status_placements
	where not deleted and generation_at is not null and available_generation < generation
	  and (placement->'spec'->'strategy'->'applyStrategy'->>'type') is distinct from 'ReportDiff'`

// newWaitingGauges reads the placements waiting for Available when scraped.
func newWaitingGauges(pool *pgxpool.Pool) *metrics.Gauges {
	return metrics.NewGauges(func(ctx context.Context) ([]float64, error) {
		var n int64
		var oldest float64
		if err := pool.QueryRow(ctx, waitingQuery).Scan(&n, &oldest); err != nil {
			return nil, fmt.Errorf("count placements waiting for Available: %w", err)
		}
		return []float64{float64(n), max(oldest, 0)}, nil
	},
		prometheus.NewDesc(metrics.Namespace+"_unavailable_placements",
			"Placements (not deleted) that have not been Available at their current generation yet.", nil, nil),
		prometheus.NewDesc(metrics.Namespace+"_oldest_unavailable_placement_age_seconds",
			"How long the placement that has waited longest for Available at its current generation has waited, "+
				"since the event that brought the generation; 0 when none waits.", nil, nil),
	)
}

// markGeneration records when the placement's current generation came (at,
// the time of the event that brought it).
func markGeneration(w *pipeline.Tx, name string, at time.Time) {
	w.Queue("record the generation time of "+name, `update status_placements set generation_at = $2 where name = $1`, name, at)
}

// noteAvailable observes the time to Available when the placement's status
// turns Available at its generation gen, from prev to next, for the first
// time; at is the time of the event that did it.
func (m *placementMetrics) noteAvailable(ctx context.Context, w *pipeline.Tx, name string, gen int64, prev, next []metav1.Condition, at time.Time) error {
	if m == nil || !turnsAvailable(prev, next, gen) {
		return nil
	}
	var since *time.Time
	err := w.QueryRow(ctx, `
		update status_placements set available_generation = $2
		where name = $1 and available_generation < $2
		returning generation_at`, []any{name, gen}, &since)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // this generation was Available before
	}
	if err != nil {
		return fmt.Errorf("record the availability of %s: %w", name, err)
	}
	if since != nil {
		m.mu.Lock()
		m.pending = append(m.pending, max(at.Sub(*since), 0))
		m.mu.Unlock()
	}
	return nil
}

// turnsAvailable reports whether a status turns Available at generation gen
// from conditions prev to next.
func turnsAvailable(prev, next []metav1.Condition, gen int64) bool {
	return availableAt(next, gen) && !availableAt(prev, gen)
}

// availableAt reports whether conditions say the placement is Available at
// generation gen. (A new generation can be Available at once, with no
// transition: a change that leaves the resources as they were.)
func availableAt(conditions []metav1.Condition, gen int64) bool {
	c := meta.FindStatusCondition(conditions, string(api.ClusterResourcePlacementAvailableConditionType))
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen
}

// commit counts what the transaction that just ended observed, if it
// committed, and forgets it either way.
func (m *placementMetrics) commit(committed bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	pending := m.pending
	m.pending = nil
	m.mu.Unlock()
	if !committed {
		return
	}
	for _, d := range pending {
		m.toAvailable.Observe(d.Seconds())
	}
}

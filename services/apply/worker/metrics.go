package worker

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/platform/metrics"
)

// workerMetrics are an apply worker's metrics, labelled with its member:
// what the bus does with its events, its apply runs' results and time, and
// the objects drifted on the member now.
type workerMetrics struct {
	member   string
	bus      *metrics.Bus
	results  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	drifted  *prometheus.GaugeVec

	mu sync.Mutex
	// driftedBy is the drifted manifests of each placement's last report.
	driftedBy map[string]int
}

// ErrorReason labels an apply run that ended in an error before it could
// report (an unreachable member, manifests that could not be fetched).
const ErrorReason = "Error"

// newWorkerMetrics registers the metrics of the worker of member with reg;
// the workers of one process share them. A nil reg keeps them unserved.
func newWorkerMetrics(reg prometheus.Registerer, member string) *workerMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	byMember := []string{"member"}
	m := &workerMetrics{
		member: member,
		bus:    metrics.NewBus(reg),
		results: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "apply_results_total",
			Help: "Apply runs of a placement on a member by the outcome they reported: the report's condition " +
				"(Applied, Available, DiffReported) and its reason (ApplySucceeded, ApplyFailed, ResourceAvailable, ...; " +
				"Error: the run failed before it could report).",
		}, []string{"member", "condition", "reason"})),
		duration: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "apply_duration_seconds",
			Help:    "Time of an apply run (or deletion) of a placement on a member.",
			Buckets: metrics.LatencyBuckets,
		}, byMember)),
		drifted: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "drifted_manifests",
			Help: "Manifests whose object on the member drifted from the hub's, over the member's placements, as last reported.",
		}, byMember)),
		driftedBy: map[string]int{},
	}
	m.drifted.WithLabelValues(member).Set(0)
	return m
}

// applied counts an apply run that took took and reported r (nil when it
// failed with err before it could report).
func (m *workerMetrics) applied(r *events.WorkReported, err error, took time.Duration) {
	m.duration.WithLabelValues(m.member).Observe(took.Seconds())
	if r == nil {
		if err != nil {
			m.results.WithLabelValues(m.member, "Applied", ErrorReason).Inc()
		}
		return
	}
	for _, c := range []struct {
		condition string
		reason    string
	}{{"Applied", r.Applied.Reason}, {"Available", r.Available.Reason}, {"DiffReported", reasonOf(r.DiffReported)}} {
		if c.reason != "" {
			m.results.WithLabelValues(m.member, c.condition, c.reason).Inc()
		}
	}
}

func reasonOf(c *events.Condition) string {
	if c == nil {
		return ""
	}
	return c.Reason
}

// reported keeps the drift r reports for its placement.
func (m *workerMetrics) reported(r *events.WorkReported) {
	n := 0
	switch {
	case r.Deleted:
	case r.Counts != nil:
		n = r.Counts.Drifted
	default:
		for _, mr := range r.Manifests {
			if len(mr.Drifts) > 0 {
				n++
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n == 0 {
		delete(m.driftedBy, r.Placement)
	} else {
		m.driftedBy[r.Placement] = n
	}
	total := 0
	for _, v := range m.driftedBy {
		total += v
	}
	m.drifted.WithLabelValues(m.member).Set(float64(total))
}

package metrics_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/metrics"
)

// series gathers reg into "name{label=value,...}" -> value (a histogram's
// count), labels in name order.
func series(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = value(mf.GetType(), m)
		}
	}
	return out
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

func TestBusCountsEventsByConsumerAndType(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := metrics.NewBus(prometheus.WrapRegistererWith(prometheus.Labels{"service": "status"}, reg))
	placed := events.TypePlacementUpserted
	b.Published(placed)
	b.Handled("status", placed, 3*time.Millisecond)
	b.Settled("status", placed, bus.Acked)
	b.Settled("status", placed, bus.Retried)
	b.Settled("status", placed, bus.Acked)
	// A type nobody knows, as anyone who may publish can send: one label value.
	b.Settled("status", "io.example.nonsense.v1", bus.DeadLettered)
	b.Settled("status", "io.example.more-nonsense.v1", bus.DeadLettered)

	got := series(t, reg)
	for name, want := range map[string]float64{
		"flotilla_events_published_total{service=status,type=" + placed + "}":                         1,
		"flotilla_events_consumed_total{consumer=status,service=status,type=" + placed + "}":          2,
		"flotilla_events_retried_total{consumer=status,service=status,type=" + placed + "}":           1,
		"flotilla_events_dead_lettered_total{consumer=status,service=status,type=unknown}":            2,
		"flotilla_event_handler_duration_seconds{consumer=status,service=status,type=" + placed + "}": 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if len(got) != 5 {
		t.Errorf("series: %v, want only the five above", keys(got))
	}

	// Watched, a consumer's failures start at zero for every type.
	b.Watch("scheduler")
	got = series(t, reg)
	for _, name := range []string{
		"flotilla_events_dead_lettered_total{consumer=scheduler,service=status,type=" + placed + "}",
		"flotilla_events_dead_lettered_total{consumer=scheduler,service=status,type=unknown}",
		"flotilla_events_retried_total{consumer=scheduler,service=status,type=" + events.TypeWorkReported + "}",
	} {
		if v, ok := got[name]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", name, v, ok)
		}
	}
}

func keys(m map[string]float64) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

// Several services share the standalone's registry, and a service started again
// on it (a test's second replica) finds its metrics there.
func TestServicesShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	wrap := func(service string) prometheus.Registerer {
		return prometheus.WrapRegistererWith(prometheus.Labels{"service": service}, reg)
	}
	scheduler, status, again := metrics.NewBus(wrap("scheduler")), metrics.NewBus(wrap("status")), metrics.NewBus(wrap("status"))
	scheduler.Published(events.TypePlacementScheduledV2)
	status.Published(events.TypePlacementStatusChangedV2)
	again.Published(events.TypePlacementStatusChangedV2)
	// A collector without the service label (the outbox's backlog) is one for all.
	desc := prometheus.NewDesc("flotilla_test_gauge", "A test gauge.", nil, nil)
	read := func(context.Context) ([]float64, error) { return []float64{7}, nil }
	first := metrics.Register(reg, metrics.NewGauges(read, desc))
	if second := metrics.Register(reg, metrics.NewGauges(read, desc)); second != first {
		t.Error("registering the same gauges again made a second copy")
	}

	got := series(t, reg)
	if v := got["flotilla_events_published_total{service=status,type="+events.TypePlacementStatusChangedV2+"}"]; v != 2 {
		t.Errorf("status published %v, want 2 (counted in one series): %v", v, keys(got))
	}
	if v := got["flotilla_events_published_total{service=scheduler,type="+events.TypePlacementScheduledV2+"}"]; v != 1 {
		t.Errorf("scheduler published %v, want 1: %v", v, keys(got))
	}
	if v := got["flotilla_test_gauge{}"]; v != 7 {
		t.Errorf("the shared gauge reads %v, want 7: %v", v, keys(got))
	}
}

func TestAGaugeThatCannotBeReadSaysWhy(t *testing.T) {
	reg := prometheus.NewRegistry()
	desc := prometheus.NewDesc("flotilla_test_gauge", "A test gauge.", nil, nil)
	reg.MustRegister(metrics.NewGauges(func(context.Context) ([]float64, error) {
		return nil, fmt.Errorf("database unreachable")
	}, desc))
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "database unreachable") {
		t.Errorf("gather: %v, want the read's error", err)
	}
}

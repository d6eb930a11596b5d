package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
	"github.com/flotilla-dev/flotilla/services/rollout"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/status"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

const (
	member    = "member-1"
	placement = "observed"
	// traceID is the trace the placement is published in, as fleetctl would.
	traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// stack is the four services, each serving /metrics on a port of its own.
type stack struct {
	env     *servicetest.Env
	metrics map[string]string // service -> its /metrics URL
}

func startStack(t *testing.T) *stack {
	t.Helper()
	env := servicetest.New(t)
	members := kube.StartT(t, 1)
	s := &stack{env: env, metrics: map[string]string{}}
	opts := func(name string) service.Options {
		o := env.Options()
		o.HealthAddr = freeAddr(t)
		s.metrics[name] = "http://" + o.HealthAddr + "/metrics"
		return o
	}
	env.Publish(events.TypeMemberJoined, subject(events.MemberSubject(member)), events.MemberJoined{Member: api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: member},
		Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 600},
	}})
	schedulerOpts, rolloutOpts, statusOpts := opts("scheduler"), opts("rollout"), opts("status")
	env.Run("scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, scheduler.Config{Options: schedulerOpts}) })
	env.Run("rollout", func(ctx context.Context) error { return rollout.Run(ctx, rollout.Config{Options: rolloutOpts}) })
	env.Run("status", func(ctx context.Context) error { return status.Run(ctx, status.Config{Options: statusOpts}) })
	applyOpts := worker.Options{Options: opts("apply"), Cluster: member, Kubeconfig: members.Kubeconfig(member)}
	applyOpts.Options.Role = service.Member
	env.Run("apply", func(ctx context.Context) error { return worker.Run(ctx, applyOpts) })
	return s
}

// freeAddr is a free local address for a health port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func subject(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// publishPlacement publishes a namespace with a ConfigMap in it and a
// placement of the namespace on every member, the placement within trace
// traceID.
func (s *stack) publishPlacement(t *testing.T) {
	t.Helper()
	s.env.Publish(events.TypeHubResourceUpserted, subject(events.HubResourceSubject("", "Namespace", "", placement)),
		events.HubResourceUpserted{Manifest: json.RawMessage(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"observed"}}`)})
	s.env.Publish(events.TypeHubResourceUpserted, subject(events.HubResourceSubject("", "ConfigMap", placement, "settings")),
		events.HubResourceUpserted{Manifest: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"observed"},"data":{"colour":"blue"}}`)})
	ev, err := events.New(events.TypePlacementUpserted, "/flotilla/fleetctl", placement, "", events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: placement},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: placement}},
			Policy:            &api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex(traceID)
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	if _, err := s.env.Publisher.Publish(ctx, subject(events.PlacementSubject(placement)), ev); err != nil {
		t.Fatal(err)
	}
}

// waitAvailable waits until the placement is Available.
func (s *stack) waitAvailable(t *testing.T) {
	t.Helper()
	poll.Every(t, 200*time.Millisecond, 3*time.Minute, "the placement Available", func() error {
		var conditions string
		err := s.env.Pool.QueryRow(t.Context(), `select coalesce(status->>'conditions', '') from placement_status where placement = $1`,
			placement).Scan(&conditions)
		if err == nil && !availableIn(conditions) {
			err = fmt.Errorf("conditions %s", conditions)
		}
		return err
	})
}

func availableIn(conditions string) bool {
	var cs []metav1.Condition
	if json.Unmarshal([]byte(conditions), &cs) != nil {
		return false
	}
	for _, c := range cs {
		if c.Type == string(api.ClusterResourcePlacementAvailableConditionType) && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// scrape reads a /metrics endpoint into "name{label="value",...}" -> value,
// labels sorted by name, a histogram's buckets, sum and count as their own
// series, as the text format shows them and PromQL names them.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	out := map[string]float64{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			for n, v := range samples(name, mf.GetType(), m) {
				out[n+labels(m)] = v
			}
		}
	}
	return out
}

// samples are the series a metric shows in the text format.
func samples(name string, typ dto.MetricType, m *dto.Metric) map[string]float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return map[string]float64{name: m.GetCounter().GetValue()}
	case dto.MetricType_GAUGE:
		return map[string]float64{name: m.GetGauge().GetValue()}
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		return map[string]float64{name + "_count": float64(h.GetSampleCount()), name + "_sum": h.GetSampleSum(), name + "_bucket": float64(h.GetSampleCount())}
	case dto.MetricType_SUMMARY:
		return map[string]float64{name + "_count": float64(m.GetSummary().GetSampleCount()), name + "_sum": m.GetSummary().GetSampleSum(), name: 0}
	}
	return map[string]float64{name: m.GetUntyped().GetValue()}
}

func labels(m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(ls, ",") + "}"
}

// atLeast fails t unless a series of name whose labels include want has a
// value of at least min.
func atLeast(t *testing.T, service string, got map[string]float64, name string, min float64, want ...string) {
	t.Helper()
	if err := hasAtLeast(got, name, min, want...); err != nil {
		t.Errorf("%s: %v", service, err)
	}
}

// hasAtLeast is atLeast as an error, for polls.
func hasAtLeast(got map[string]float64, name string, min float64, want ...string) error {
	best := -1.0
	for series, v := range got {
		if !strings.HasPrefix(series, name+"{") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(series, w)
		}
		if ok && v > best {
			best = v
		}
	}
	if best < min {
		return fmt.Errorf("%s%v = %v, want at least %v", name, want, best, min)
	}
	return nil
}

// exactly fails t unless the series of name whose labels include want has value v.
func exactly(t *testing.T, service string, got map[string]float64, name string, v float64, want ...string) {
	t.Helper()
	if err := hasExactly(got, name, v, want...); err != nil {
		t.Errorf("%s: %v", service, err)
	}
}

// hasExactly is exactly as an error, for polls.
func hasExactly(got map[string]float64, name string, v float64, want ...string) error {
	for series, value := range got {
		if !strings.HasPrefix(series, name+"{") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(series, w)
		}
		if ok {
			if value != v {
				return fmt.Errorf("%s = %v, want %v", series, value, v)
			}
			return nil
		}
	}
	return fmt.Errorf("no series %s%v", name, want)
}

func typ(t string) string { return fmt.Sprintf("type=%q", t) }

// TestServicesShowWhatHappenedToAPlacement runs the four services, drives one
// placement to Available on a real member, sends one event nobody can handle,
// and reads every service's /metrics over HTTP.
func TestServicesShowWhatHappenedToAPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, NATS and a member cluster")
	}
	s := startStack(t)
	s.publishPlacement(t)
	s.waitAvailable(t)
	// An event of a type nobody knows: the scheduler and the rollout
	// dead-letter it (the status service records it in the audit log).
	bogus := cloudevents.New()
	bogus.SetID("nonsense-1")
	bogus.SetSource("/flotilla/test")
	bogus.SetType("io.example.nonsense.v1")
	msg, err := bus.Encode(bogus, subject(events.PlacementSubject("nonsense")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.env.JS.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, "the scheduler to dead-letter the event nobody knows", func() error {
		got := scrape(t, s.metrics["scheduler"])
		for series, v := range got {
			if strings.HasPrefix(series, "flotilla_events_dead_lettered_total{") && strings.Contains(series, `type="unknown"`) && v >= 1 {
				return nil
			}
		}
		return fmt.Errorf("no dead letter counted yet")
	})
	poll.Until(t, time.Minute, "the outbox drained", func() error {
		got := scrape(t, s.metrics["status"])
		if v := got["flotilla_outbox_pending_events{}"]; v != 0 {
			return fmt.Errorf("%v events wait in the outbox", v)
		}
		return nil
	})

	// The rollout takes in the reports and the event nobody knows on its own
	// consumer, apart from the status service and the scheduler waited for above.
	poll.Until(t, time.Minute, "the rollout and the scheduler to have taken in every event", func() error {
		rollout, scheduler := scrape(t, s.metrics["rollout"]), scrape(t, s.metrics["scheduler"])
		return errors.Join(
			hasAtLeast(rollout, "flotilla_events_consumed_total", 1, `consumer="rollout"`, typ(events.TypeWorkReported)),
			hasExactly(rollout, "flotilla_consumer_pending_messages", 0, `consumer="rollout"`),
			hasExactly(scheduler, "flotilla_consumer_pending_messages", 0, `consumer="scheduler"`, `stream="EVENTS"`),
			hasExactly(scheduler, "flotilla_outbox_pending_events", 0))
	})
	scraped := map[string]map[string]float64{}
	for name, url := range s.metrics {
		scraped[name] = scrape(t, url)
	}
	// The hub services share the outbox: any of their relays publishes what
	// any of them emitted.
	hub := map[string]float64{}
	for _, name := range []string{"scheduler", "rollout", "status"} {
		for series, v := range scraped[name] {
			if strings.HasPrefix(series, "flotilla_events_published_total{") {
				hub[series[strings.Index(series, "type="):]] += v
			}
		}
	}
	t.Run("published by the hub", func(t *testing.T) {
		for _, typ := range []string{events.TypePlacementScheduledV2, events.TypeSnapshotCreated, events.TypeWorkDesired,
			events.TypeRolloutProgressedV2, events.TypePlacementStatusChangedV2} {
			if hub[fmt.Sprintf("type=%q}", typ)] < 1 {
				t.Errorf("the hub services published no %s: %v", typ, hub)
			}
		}
	})
	t.Run("scheduler", func(t *testing.T) {
		got := scraped["scheduler"]
		atLeast(t, "scheduler", got, "flotilla_events_consumed_total", 1, `consumer="scheduler"`, typ(events.TypePlacementUpserted), `service="scheduler"`)
		atLeast(t, "scheduler", got, "flotilla_events_consumed_total", 1, `consumer="scheduler"`, typ(events.TypeMemberJoined))
		atLeast(t, "scheduler", got, "flotilla_event_handler_duration_seconds_count", 1, `consumer="scheduler"`, typ(events.TypePlacementUpserted))
		atLeast(t, "scheduler", got, "flotilla_events_dead_lettered_total", 1, `consumer="scheduler"`, `type="unknown"`)
		exactly(t, "scheduler", got, "flotilla_consumer_pending_messages", 0, `consumer="scheduler"`, `stream="EVENTS"`)
		exactly(t, "scheduler", got, "flotilla_outbox_pending_events", 0)
		exactly(t, "scheduler", got, "flotilla_outbox_oldest_pending_age_seconds", 0)
		atLeast(t, "scheduler", got, "process_resident_memory_bytes", 1)
	})
	t.Run("rollout", func(t *testing.T) {
		got := scraped["rollout"]
		atLeast(t, "rollout", got, "flotilla_events_consumed_total", 1, `consumer="rollout"`, typ(events.TypePlacementScheduledV2))
		atLeast(t, "rollout", got, "flotilla_events_consumed_total", 1, `consumer="rollout"`, typ(events.TypeWorkReported))
		exactly(t, "rollout", got, "flotilla_consumer_pending_messages", 0, `consumer="rollout"`)
	})
	t.Run("status", func(t *testing.T) {
		got := scraped["status"]
		atLeast(t, "status", got, "flotilla_events_consumed_total", 1, `consumer="status"`, typ(events.TypeWorkReported))
		exactly(t, "status", got, "flotilla_placements", 1, `condition="ClusterResourcePlacementAvailable"`, `status="True"`)
		exactly(t, "status", got, "flotilla_placements", 1, `condition="ClusterResourcePlacementScheduled"`, `status="True"`)
		exactly(t, "status", got, "flotilla_placement_time_to_available_seconds_count", 1)
		atLeast(t, "status", got, "flotilla_placement_time_to_available_seconds_sum", 0.001)
		exactly(t, "status", got, "flotilla_unavailable_placements", 0)
		exactly(t, "status", got, "flotilla_oldest_unavailable_placement_age_seconds", 0)
	})
	t.Run("apply", func(t *testing.T) {
		got := scraped["apply"]
		c := `consumer="apply-member-1"`
		atLeast(t, "apply", got, "flotilla_events_consumed_total", 1, c, typ(events.TypeWorkDesired), `service="apply"`)
		exactly(t, "apply", got, "flotilla_consumer_pending_messages", 0, c, `stream="WORK"`)
		atLeast(t, "apply", got, "flotilla_events_published_total", 1, typ(events.TypeWorkReported))
		atLeast(t, "apply", got, "flotilla_events_published_total", 1, typ(events.TypeMemberHeartbeat))
		atLeast(t, "apply", got, "flotilla_apply_results_total", 1, `member="member-1"`, `condition="Applied"`, `reason="ApplySucceeded"`)
		atLeast(t, "apply", got, "flotilla_apply_results_total", 1, `member="member-1"`, `condition="Available"`, `reason="ResourceAvailable"`)
		atLeast(t, "apply", got, "flotilla_apply_duration_seconds_count", 1, `member="member-1"`)
		exactly(t, "apply", got, "flotilla_drifted_manifests", 0, `member="member-1"`)
	})
	t.Run("one trace from the placement to the member's report", func(t *testing.T) {
		s.checkTrace(t)
	})
	t.Run("the dashboard and alerts ask for exported metrics", func(t *testing.T) {
		exported := map[string]bool{}
		for _, got := range scraped {
			for series := range got {
				exported[series[:strings.Index(series, "{")]] = true
			}
		}
		checkDeployQueries(t, exported)
	})
}

// checkTrace reads what the services emitted for the placement and checks that
// all of it belongs to the trace the placement was published in: the
// decisions, snapshots, rollout progress and status changes on EVENTS, the
// work on WORK, and the member's reports.
func (s *stack) checkTrace(t *testing.T) {
	t.Helper()
	inTrace := map[string]int{}
	outside := map[string][]string{}
	note := func(ev cloudevents.Event) {
		tp, _ := ev.Extensions()[bus.ExtensionTraceparent].(string)
		if strings.HasPrefix(tp, "00-"+traceID+"-") {
			inTrace[ev.Type()]++
		} else {
			outside[ev.Type()] = append(outside[ev.Type()], tp)
		}
	}
	for _, ev := range s.streamEvents(t, bus.StreamEvents) {
		p, err := events.Decode(ev)
		if err != nil {
			continue // the event nobody knows
		}
		switch p := p.(type) {
		case *events.PlacementScheduledV2:
			note(ev)
		case *events.SnapshotCreated:
			if p.Placement == placement {
				note(ev)
			}
		case *events.RolloutProgressedV2:
			note(ev)
		case *events.PlacementStatusChangedV2:
			note(ev)
		case *events.WorkReported:
			if p.Placement == placement {
				note(ev)
			}
		}
	}
	for _, ev := range s.streamEvents(t, bus.StreamWork) {
		note(ev)
	}
	// Reports on changes the member's watch saw start traces of their own;
	// the apply runs of the placement's work answer within its trace.
	delete(outside, events.TypeWorkReported)
	for _, typ := range []string{events.TypePlacementScheduledV2, events.TypeSnapshotCreated, events.TypeRolloutProgressedV2,
		events.TypeWorkDesired, events.TypeWorkReported, events.TypePlacementStatusChangedV2} {
		if inTrace[typ] == 0 {
			t.Errorf("no %s in the placement's trace", typ)
		}
	}
	for typ, tps := range outside {
		t.Errorf("%d %s outside the placement's trace, with traceparents %q", len(tps), typ, tps)
	}
	t.Logf("events in the placement's trace: %v", inTrace)
}

// streamEvents are the events stream holds, oldest first.
func (s *stack) streamEvents(t *testing.T, stream string) []cloudevents.Event {
	t.Helper()
	st, err := s.env.JS.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []cloudevents.Event
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			continue // deleted
		}
		ev, err := bus.Decode(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
		if err != nil {
			t.Fatalf("%s %d: %v", stream, seq, err)
		}
		out = append(out, ev)
	}
	return out
}

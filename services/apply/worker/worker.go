// Package worker is the apply worker of one member cluster: it consumes the
// cluster's desired state from the WORK stream, applies it with the applier,
// publishes the results, watches the objects it owns to report drift and
// availability as they change, and sends the member's heartbeat.
//
// A worker keeps no database. On start it reads the current desired state of
// every placement (the last message per subject) and applies it again, which
// changes nothing that is already in place.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/metrics"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
)

// Config configures the worker of one member cluster.
type Config struct {
	// Cluster is the member's name.
	Cluster string
	// REST reaches the member's API server.
	REST *rest.Config
	// JetStream is the bus.
	JetStream jetstream.JetStream
	// HeartbeatPeriod is how often the member's heartbeat is published.
	// Default 60s (MemberCluster's default heartbeatPeriodSeconds).
	HeartbeatPeriod time.Duration
	// ResyncPeriod is how often every placement is applied again, which
	// repairs what watches missed and refreshes ReportDiff results.
	// Default 5 minutes.
	ResyncPeriod time.Duration
	// Placements bounds the placements applied at once. Default 4.
	Placements int
	// MaxInFlight bounds the requests in flight to the member, all
	// placements together (objects of a dependency wave are applied at
	// once up to it). Default applier.DefaultMaxInFlight.
	MaxInFlight int
	// RetryBase and RetryMax bound the backoff of a placement whose apply
	// or deletion could not finish. Default 1s and 5 minutes.
	RetryBase, RetryMax time.Duration
	// ProbePeriod is how often the worker asks an unreachable member's API
	// server whether it is back; when it is, the placements that failed on
	// it are applied at once, not at the end of their backoff. Default 2s.
	ProbePeriod time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics registers the worker's metrics (labelled with its member);
	// nil keeps them unserved.
	Metrics prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.HeartbeatPeriod <= 0 {
		c.HeartbeatPeriod = 60 * time.Second
	}
	if c.ResyncPeriod <= 0 {
		c.ResyncPeriod = 5 * time.Minute
	}
	if c.Placements <= 0 {
		c.Placements = 4
	}
	if c.RetryBase <= 0 {
		c.RetryBase = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Minute
	}
	if c.ProbePeriod <= 0 {
		c.ProbePeriod = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Worker applies one member cluster's placements.
type Worker struct {
	cfg       Config
	log       *slog.Logger
	applier   *applier.Applier
	publisher *bus.Publisher
	source    string
	metrics   *workerMetrics

	// queue holds placements to apply, delete or refresh; a placement is
	// in it at most once, however many changes arrive.
	queue workqueue.TypedRateLimitingInterface[item]
	// checks holds member objects whose change must be examined.
	checks workqueue.TypedRateLimitingInterface[check]

	mu      sync.Mutex
	desired map[string]*desired // by placement
	// published is the digest of the last report published per placement.
	published map[string]string
	// pending holds the newest report on member changes not yet published, per placement
	// (see publishSoon).
	pending map[string]*events.WorkReported
	// unsent holds what the bus has not taken yet: the newest report and the newest
	// removal record per placement, sent again until it is taken (see resend).
	unsent map[outKey]*outgoing
	wake   chan struct{} // wakes resend
	// removed holds the WORK sequence of the last tombstone carried out per placement, as
	// this worker's WorkRemoved records say: a restarted worker skips those tombstones.
	removed map[string]uint64
	// stranded holds the placements that failed because the member could not be reached,
	// to be applied again as soon as it answers (see reconnect); strandedWake wakes it.
	stranded     map[item]bool
	strandedWake chan struct{}
	// beatSoon asks for a heartbeat before the period is up: a namespace came
	// or went, which ResourcePlacements are scheduled by.
	beatSoon chan struct{}

	watch *watcher
	// diffs watches the objects of ReportDiff placements.
	diffs *diffWatcher
	locks keyedLocks
}

// itemKind says what to do with a placement.
type itemKind int

const (
	reconcile itemKind = iota // apply the desired state or the tombstone
	refresh                   // republish availability that changed with time
)

type item struct {
	kind      itemKind
	placement string
}

// desired is the latest desired state of a placement.
type desired struct {
	seq uint64    // stream sequence of the message
	at  time.Time // when the worker took it, for the debug log
	// trace is the trace the desired state came in, which its apply and the
	// report that answers it carry on.
	trace trace.SpanContext
	work  *events.WorkDesired
	tomb  *events.WorkTombstoned
	done  bool // a tombstone that has been carried out
	// resolved is work with the manifests its ManifestsRef names, once fetched.
	resolved *events.WorkDesired
}

// New returns the worker described by cfg.
func New(cfg Config) (*Worker, error) {
	cfg.setDefaults()
	if cfg.Cluster == "" || cfg.REST == nil || cfg.JetStream == nil {
		return nil, errors.New("new apply worker: Cluster, REST and JetStream are required")
	}
	log := cfg.Logger.With("cluster", cfg.Cluster)
	a, err := applier.New(cfg.REST, applier.Options{Cluster: cfg.Cluster, MaxInFlight: cfg.MaxInFlight, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	m := newWorkerMetrics(cfg.Metrics, cfg.Cluster)
	w := &Worker{
		cfg:       cfg,
		log:       log,
		applier:   a,
		publisher: bus.NewPublisher(cfg.JetStream, bus.WithObserver(m.bus)),
		source:    "flotilla/apply/" + cfg.Cluster,
		metrics:   m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[item](cfg.RetryBase, cfg.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[item]{Name: "placements-" + cfg.Cluster}),
		checks: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[check](cfg.RetryBase, cfg.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[check]{Name: "checks-" + cfg.Cluster}),
		desired:   map[string]*desired{},
		published: map[string]string{},
		pending:   map[string]*events.WorkReported{},
		unsent:    map[outKey]*outgoing{},
		wake:      make(chan struct{}, 1),
		removed:   map[string]uint64{},
		stranded:  map[item]bool{},

		strandedWake: make(chan struct{}, 1),
		beatSoon:     make(chan struct{}, 1),
	}
	w.watch = newWatcher(w)
	w.diffs = newDiffWatcher(w)
	return w, nil
}

// Run runs the worker until ctx ends; it returns nil then, or the error that
// stopped it (the bus could not be read).
func (w *Worker) Run(ctx context.Context) error {
	// NATS may not be up yet, or may not answer JetStream requests yet: wait for it.
	var consumer string
	err := bus.Await(ctx, w.log, "NATS JetStream to create this member's work consumer", func(ctx context.Context) (err error) {
		consumer, err = bus.EnsureApplyConsumer(ctx, w.cfg.JetStream, w.cfg.Cluster, bus.TopologyOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("apply worker %s: %w", w.cfg.Cluster, err)
	}
	// Current desired state first, so that a restarted worker holds (and
	// watches) every placement before new changes arrive.
	if err := bus.Await(ctx, w.log, "NATS JetStream to replay this member's desired state", w.replay); err != nil {
		return fmt.Errorf("apply worker %s: %w", w.cfg.Cluster, err)
	}
	w.log.Info("apply worker started", "placements", w.count())
	if w.cfg.Metrics != nil {
		metrics.Register(w.cfg.Metrics, metrics.NewConsumerLag(w.cfg.JetStream, bus.StreamWork, consumer))
	}
	w.metrics.bus.Watch(consumer)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer w.queue.ShutDown()
		defer w.checks.ShutDown()
		<-gctx.Done()
		return nil
	})
	g.Go(func() error {
		err := bus.Consume(gctx, w.cfg.JetStream, bus.StreamWork, consumer, w.handle,
			bus.WithValidator(events.Admit), bus.WithLogger(w.log), bus.WithObserver(w.metrics.bus))
		if err != nil {
			return fmt.Errorf("apply worker %s: %w", w.cfg.Cluster, err)
		}
		return nil
	})
	for range w.cfg.Placements {
		g.Go(func() error { w.runPlacements(gctx); return nil })
	}
	for range 2 {
		g.Go(func() error { w.runChecks(gctx); return nil })
	}
	g.Go(func() error { w.heartbeats(gctx); return nil })
	g.Go(func() error {
		// Previews are a convenience: without them the worker still applies.
		if err := w.servePreviews(gctx); err != nil {
			w.log.Error("placement previews are not answered", "err", err)
		}
		return nil
	})
	g.Go(func() error { w.resend(gctx); return nil })
	g.Go(func() error { w.resync(gctx); return nil })
	g.Go(func() error { w.reconnect(gctx); return nil })
	g.Go(func() error { w.watch.run(gctx); return nil })
	g.Go(func() error { w.diffs.run(gctx); return nil })
	return g.Wait()
}

func (w *Worker) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.desired)
}

// resync queues every placement again every ResyncPeriod.
func (w *Worker) resync(ctx context.Context) {
	t := time.NewTicker(w.cfg.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.mu.Lock()
			for p, d := range w.desired {
				if !d.done {
					w.queue.Add(item{reconcile, p})
				}
			}
			w.mu.Unlock()
		}
	}
}

// runPlacements processes queued placements until the queue shuts down.
func (w *Worker) runPlacements(ctx context.Context) {
	for {
		it, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		w.process(ctx, it)
		w.queue.Done(it)
	}
}

func (w *Worker) process(ctx context.Context, it item) {
	if it.kind == refresh {
		unlock := w.locks.lock(it.placement)
		if r := w.applier.Refresh(it.placement); r != nil {
			w.publish(ctx, r)
		}
		unlock()
		w.queue.Forget(it)
		w.scheduleRefresh(it.placement)
		return
	}
	w.mu.Lock()
	d := w.desired[it.placement]
	var (
		work *events.WorkDesired
		tomb *events.WorkTombstoned
	)
	if d != nil && !d.done {
		work, tomb = d.work, d.tomb
	}
	seq, taken := uint64(0), time.Time{}
	var within trace.SpanContext
	if d != nil {
		seq, taken, within = d.seq, d.at, d.trace
	}
	w.mu.Unlock()

	unlock := w.locks.lock(it.placement)
	defer unlock()
	if work != nil || tomb != nil {
		var span trace.Span
		ctx, span = w.startApply(ctx, within, it.placement)
		defer span.End()
	}
	began := time.Now()
	var (
		report *events.WorkReported
		err    error
	)
	switch {
	case work != nil:
		if work, err = w.resolve(ctx, d, work); err == nil {
			report, err = w.applier.Apply(ctx, work)
		}
	case tomb != nil:
		report, err = w.applier.Delete(ctx, tomb.Placement, tomb.DeleteStrategy)
	default:
		w.queue.Forget(it)
		return
	}
	if ctx.Err() != nil {
		return
	}
	applied := time.Now()
	w.metrics.applied(report, err, applied.Sub(began))
	if err != nil {
		trace.SpanFromContext(ctx).SetStatus(codes.Error, err.Error())
	}
	if report != nil {
		w.dropPending(it.placement) // this report is newer than any waiting
		w.publish(ctx, report)
	}
	w.log.Debug("placement processed", "placement", it.placement, "since_received", began.Sub(taken).Round(100*time.Microsecond),
		"apply", applied.Sub(began).Round(100*time.Microsecond), "publish", time.Since(applied).Round(100*time.Microsecond))
	if err == nil && retriable(report) {
		err = errors.New("some manifests failed to apply")
	}
	if err != nil {
		w.log.Warn("placement not done; will retry", "placement", it.placement, "retries", w.queue.NumRequeues(it), "err", err)
		if errors.Is(err, applier.ErrUnreachable) {
			w.strand(it)
		}
		w.queue.AddRateLimited(it)
		w.watch.sync()
		w.diffs.sync()
		return
	}
	w.queue.Forget(it)
	if tomb != nil {
		w.mu.Lock()
		if cur := w.desired[it.placement]; cur != nil && cur.seq == seq {
			cur.done = true
		}
		w.mu.Unlock()
		// Remember it on the bus, so that a restart does not carry it out again.
		w.recordRemoved(ctx, tomb, seq)
	}
	w.watch.sync()
	w.diffs.sync()
	w.scheduleRefresh(it.placement)
}

// retriable reports whether a report holds failures that may pass on their
// own (the API server refused a write, a namespace is not there yet), as
// opposed to decisions that only a new desired state or a user changes
// (takeover refusals, drifts, bad manifests).
func retriable(r *events.WorkReported) bool {
	if r == nil {
		return false
	}
	for _, m := range r.Manifests {
		if m.Applied.Status == "False" && m.Applied.Reason == api.ManifestApplyFailedReason {
			return true
		}
	}
	return false
}

// scheduleRefresh queues a refresh for when a not-trackable object of the
// placement will count as available.
func (w *Worker) scheduleRefresh(placement string) {
	if next := w.applier.NextRecheck(placement); !next.IsZero() {
		w.queue.AddAfter(item{refresh, placement}, time.Until(next)+10*time.Millisecond)
	}
}

// placementFor maps an owner label token on a member object to the placement
// it names, among those the worker holds.
func (w *Worker) placementFor(tokens []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for p, d := range w.desired {
		if d.work == nil {
			continue
		}
		for _, tok := range tokens {
			if ownerToken(p) == tok {
				out = append(out, p)
			}
		}
	}
	return out
}

// startApply starts the span of applying a placement, within the trace its
// desired state came in.
func (w *Worker) startApply(ctx context.Context, within trace.SpanContext, placement string) (context.Context, trace.Span) {
	if within.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, within)
	}
	return otel.Tracer("github.com/flotilla-dev/flotilla/services/apply/worker").Start(ctx, "apply "+placement,
		trace.WithAttributes(attribute.String("flotilla.member", w.cfg.Cluster), attribute.String("flotilla.placement", placement)))
}

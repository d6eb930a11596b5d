package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Source is the CloudEvent source of the MemberJoined events the fleet publishes (what
// `fleetctl apply -f membercluster.yaml` would publish). A member's own events carry the
// real worker's source, flotilla/apply/<cluster>.
const Source = "flotilla/fleet-sim"

// joiners is how many members join at once when JoinRate does not bound them. Each join
// makes JetStream API calls (create the consumer, read it back); more at once only queue
// in the server's API handling and time out.
const joiners = 8

// Fleet is a set of simulated member clusters.
type Fleet struct {
	opts    Options
	log     *slog.Logger
	js      jetstream.JetStream
	pub     *bus.Publisher
	members []*member
	byName  map[string]*member

	// slots bounds the applies and publishes in flight; Run takes them all before it
	// returns, so nothing publishes after it.
	slots  chan struct{}
	ctx    context.Context // Run's, for timers
	joined chan struct{}
	stats  counters
}

// counters are the fleet's statistics, updated atomically.
type counters struct {
	joined, heartbeats, work, tombstones, reports, failures, publishErrors, consumerRestarts atomic.Int64
	firstWork, lastReport                                                                    atomic.Int64 // unix nanoseconds
	lastSeq, lastReportSeq                                                                   maxSeq
}

// Stats are what the fleet has done so far.
type Stats struct {
	// Joined counts members that have joined and sent their first heartbeat.
	Joined int
	// Heartbeats, Work (desired states taken), Tombstones and Reports (WorkReported
	// published) count events; Failures counts simulated apply failures; PublishErrors
	// counts events that could not be published after retries; ConsumerRestarts counts
	// consumers started again after their start timed out.
	Heartbeats, Work, Tombstones, Reports, Failures, PublishErrors, ConsumerRestarts int
	// FirstWork is when the first desired state arrived; LastReport when the last report
	// was published. Zero until then.
	FirstWork, LastReport time.Time
	// LastSeq is the highest stream sequence of what the fleet published (joins,
	// heartbeats, reports: all in the EVENTS stream), LastReportSeq that of its reports. A
	// hub service whose consumer has acknowledged LastSeq has taken in everything the fleet
	// said so far.
	LastSeq, LastReportSeq uint64
}

// New returns a fleet of opts.Members simulated members; Run makes them join and work.
func New(opts Options) (*Fleet, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("simulated fleet: %w", err)
	}
	f := &Fleet{
		opts:   opts,
		log:    opts.Logger,
		js:     opts.JetStream,
		pub:    bus.NewPublisher(opts.JetStream),
		byName: make(map[string]*member, opts.Members),
		slots:  make(chan struct{}, opts.MaxInFlight),
		joined: make(chan struct{}),
	}
	width := len(strconv.Itoa(opts.Members))
	for i := range opts.Members {
		name := fmt.Sprintf("%s-%0*d", opts.Prefix, width, i+1)
		m, err := newMember(f, i, name)
		if err != nil {
			return nil, fmt.Errorf("simulated fleet: %w", err)
		}
		f.members = append(f.members, m)
		f.byName[name] = m
	}
	return f, nil
}

// Names are the members' names, in order.
func (f *Fleet) Names() []string {
	out := make([]string, len(f.members))
	for i, m := range f.members {
		out[i] = m.name
	}
	return out
}

// Joined is closed once every member has joined and sent its first heartbeat.
func (f *Fleet) Joined() <-chan struct{} { return f.joined }

// Stats returns what the fleet has done so far.
func (f *Fleet) Stats() Stats {
	t := func(v *atomic.Int64) time.Time {
		if n := v.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Time{}
	}
	c := &f.stats
	return Stats{
		Joined: int(c.joined.Load()), Heartbeats: int(c.heartbeats.Load()), Work: int(c.work.Load()),
		Tombstones: int(c.tombstones.Load()), Reports: int(c.reports.Load()), Failures: int(c.failures.Load()),
		PublishErrors: int(c.publishErrors.Load()), ConsumerRestarts: int(c.consumerRestarts.Load()), FirstWork: t(&c.firstWork), LastReport: t(&c.lastReport),
		LastSeq: c.lastSeq.Load(), LastReportSeq: c.lastReportSeq.Load(),
	}
}

// Run makes the members join, at JoinRate, and work until ctx ends. It returns nil then, or
// the error that stopped the fleet (a consumer could not be created or stopped on its own).
func (f *Fleet) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	f.ctx = gctx
	if f.opts.Consumers == Shared {
		consumer, err := f.ensureSharedConsumer(ctx)
		if err != nil {
			return err
		}
		g.Go(func() error { return f.consume(gctx, f.log, consumer, f.dispatch) })
	}
	g.Go(func() error { return f.servePreviews(gctx) })
	g.Go(func() error {
		err := f.join(gctx, g)
		if err == nil {
			close(f.joined)
		}
		return err
	})
	err := g.Wait()
	// Wait for what timers started, and keep later ones from publishing: they find no slot
	// before they see the context ended.
	for range cap(f.slots) {
		f.slots <- struct{}{}
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// consume runs bus.Consume on a consumer of the WORK stream, with the real worker's
// options, until ctx ends. bus.Consume now waits while its first look at the consumer times
// out, which happens when thousands of consumers start at once (the server answers
// JetStream API calls one at a time), as a real worker does; should it still fail with a
// timeout, a simulated worker starts consuming again after a pause. Stats.ConsumerRestarts
// counts them.
func (f *Fleet) consume(ctx context.Context, log *slog.Logger, consumer string, h bus.Handler) error {
	pause := time.Second
	for {
		began := time.Now()
		err := bus.Consume(ctx, f.js, bus.StreamWork, consumer, h, bus.WithValidator(events.Admit), bus.WithLogger(log))
		switch {
		case err == nil || ctx.Err() != nil:
			return nil
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) || time.Since(began) > time.Minute:
			return fmt.Errorf("simulated fleet: %w", err)
		}
		f.stats.consumerRestarts.Add(1)
		log.Warn("consuming work failed to start; starting again", "consumer", consumer, "in", pause, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// join makes every member join, paced by JoinRate, and starts its consumer (PerMember) and
// heartbeats.
func (f *Fleet) join(ctx context.Context, g *errgroup.Group) error {
	jg, jctx := errgroup.WithContext(ctx)
	jg.SetLimit(joiners)
	start := time.Now()
	for i, m := range f.members {
		if f.opts.JoinRate > 0 {
			due := start.Add(time.Duration(float64(i) / f.opts.JoinRate * float64(time.Second)))
			select {
			case <-jctx.Done():
			case <-time.After(time.Until(due)):
			}
		}
		if jctx.Err() != nil {
			break
		}
		jg.Go(func() error {
			consumer, err := m.join(jctx)
			if err != nil {
				return err
			}
			if consumer != "" {
				g.Go(func() error { return f.consume(ctx, m.log, consumer, m.handle) })
			}
			m.heartbeat(ctx)
			f.stats.joined.Add(1)
			// The next beat comes within the first period, at a point drawn for the
			// member, so that members that joined together do not beat together.
			m.armHeartbeat(time.Duration((0.5 + draw(f.opts.Seed, "phase", m.name)/2) * float64(f.opts.HeartbeatPeriod)))
			return nil
		})
	}
	if err := jg.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

func (f *Fleet) ensureSharedConsumer(ctx context.Context) (string, error) {
	cfg, err := bus.ApplyConsumerConfig(f.members[0].name) // the real tuning, another name and filter
	if err != nil {
		return "", err
	}
	cfg.Durable, cfg.Description = SharedConsumer, "Simulated fleet: every member's work"
	cfg.FilterSubject = bus.SubjectsWork
	if _, err := f.js.CreateOrUpdateConsumer(ctx, bus.StreamWork, cfg); err != nil {
		return "", fmt.Errorf("simulated fleet: ensure consumer %s: %w", SharedConsumer, err)
	}
	return SharedConsumer, nil
}

// dispatch hands a message of the shared consumer to its member; work for clusters that
// are not in this fleet (real members beside it) is acknowledged and left alone.
func (f *Fleet) dispatch(ctx context.Context, ev cloudevents.Event, m bus.Meta) error {
	_, cluster := events.SubjectNames(m.Subject)
	mem := f.byName[cluster]
	if mem == nil {
		return nil
	}
	return mem.handle(ctx, ev, m)
}

// slot waits for room to apply or publish; false when ctx ended first.
func (f *Fleet) slot(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case f.slots <- struct{}{}:
		if ctx.Err() != nil {
			<-f.slots
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *Fleet) release() { <-f.slots }

// publish publishes ev on subject, retrying a few times as the real worker does; it
// returns the stream sequence, 0 when it could not.
func (f *Fleet) publish(ctx context.Context, subject string, ev cloudevents.Event, log *slog.Logger) uint64 {
	delay := 100 * time.Millisecond
	var err error
	for attempt := 1; ; attempt++ {
		var ack *jetstream.PubAck
		if ack, err = f.pub.Publish(ctx, subject, ev); err == nil {
			f.stats.lastSeq.store(ack.Sequence)
			return ack.Sequence
		}
		if attempt == 5 || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay *= 2
	}
	if ctx.Err() == nil {
		f.stats.publishErrors.Add(1)
		log.Error("event not published", "type", ev.Type(), "subject", subject, "err", err)
	}
	return 0
}

// maxSeq is a stream sequence that only grows.
type maxSeq struct{ atomic.Uint64 }

func (m *maxSeq) store(seq uint64) {
	for {
		cur := m.Load()
		if seq <= cur || m.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// memberCluster is the MemberCluster member i joins as.
func (f *Fleet) memberCluster(i int, name string) api.MemberCluster {
	return api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.ClusterGroupVersion.String(), Kind: api.MemberClusterKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: f.opts.Labels(i)},
		Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: int32(f.opts.HeartbeatPeriod / time.Second)},
	}
}

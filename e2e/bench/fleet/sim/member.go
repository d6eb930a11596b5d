package sim

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

// member is one simulated member cluster: its placements and timers. It keeps what the
// real worker keeps in memory (the latest desired state per placement, the last report's
// digest) and, in place of a cluster, the objects its last apply left there.
type member struct {
	f       *Fleet
	index   int
	name    string
	source  string
	subject string // flotilla.member.<name>: its join
	beat    string // flotilla.member.<name>.heartbeat: its heartbeats, as the real worker's
	log     *slog.Logger

	outage atomic.Int32 // an Outage: Down and Recover set it

	mu         sync.Mutex
	placements map[string]*placement
}

func newMember(f *Fleet, index int, name string) (*member, error) {
	subject, err := events.MemberSubject(name)
	if err != nil {
		return nil, err
	}
	beat, err := events.HeartbeatSubject(name)
	if err != nil {
		return nil, err
	}
	return &member{
		f: f, index: index, name: name, subject: subject, beat: beat,
		source:     "flotilla/apply/" + name,
		log:        f.log.With("cluster", name),
		placements: map[string]*placement{},
	}, nil
}

// join publishes the member's MemberJoined and, with PerMember consumers, creates its
// durable consumer exactly as the real worker does; it returns that consumer's name.
func (m *member) join(ctx context.Context) (consumer string, err error) {
	ev, err := events.New(events.TypeMemberJoined, Source, m.name, "",
		events.MemberJoined{Member: m.f.memberCluster(m.index, m.name)})
	if err != nil {
		return "", fmt.Errorf("join %s: %w", m.name, err)
	}
	ack, err := m.f.pub.Publish(ctx, m.subject, ev)
	if err != nil {
		return "", fmt.Errorf("join %s: %w", m.name, err)
	}
	m.f.stats.lastSeq.store(ack.Sequence)
	if m.f.opts.Consumers != PerMember {
		return "", nil
	}
	consumer, err = bus.EnsureApplyConsumer(ctx, m.f.js, m.name, bus.TopologyOptions{})
	if err != nil {
		return "", fmt.Errorf("simulated member %s: %w", m.name, err)
	}
	return consumer, nil
}

// handle takes one message of the member's work, as the real worker's handle does: it
// records the desired state and queues the placement.
func (m *member) handle(ctx context.Context, ev cloudevents.Event, meta bus.Meta) error {
	d := desired{seq: meta.Sequence}
	var placementName, cluster string
	switch ev.Type() {
	case events.TypeWorkDesired:
		w, err := decodeWork(ctx, m.f.js, ev)
		if err != nil {
			return err
		}
		d.work, placementName, cluster = w, w.Placement, w.Cluster
		m.f.stats.work.Add(1)
	case events.TypeWorkTombstoned:
		t, err := events.DecodeAs[events.WorkTombstoned](ev)
		if err != nil {
			return bus.Permanent(err)
		}
		d.tomb, placementName, cluster = t, t.Placement, t.Cluster
		m.f.stats.tombstones.Add(1)
	default:
		return bus.Permanent(fmt.Errorf("event type %q does not belong on the work stream", ev.Type()))
	}
	if cluster != m.name {
		return bus.Permanent(fmt.Errorf("desired state for cluster %q reached the simulated member %q", cluster, m.name))
	}
	m.f.stats.firstWork.CompareAndSwap(0, time.Now().UnixNano())

	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.placements[placementName]
	if p == nil {
		p = &placement{name: placementName}
		m.placements[placementName] = p
	}
	if p.desired.seq >= d.seq && (p.desired.work != nil || p.desired.tomb != nil) {
		return nil // a redelivery, or older than what the member holds
	}
	p.desired = d
	p.attempt = 0
	if m.down() != Up {
		p.held = true // done when the member recovers
		return nil
	}
	m.kick(p, actApply, m.f.opts.ApplyDelay.Sample(m.draw("apply", p.name, strconv.FormatUint(d.seq, 10))))
	return nil
}

// draw is the member's deterministic draw for parts.
func (m *member) draw(parts ...string) float64 {
	return draw(m.f.opts.Seed, append([]string{m.name}, parts...)...)
}

// action is what a placement's timer does when it fires.
type action int

const (
	actNone    action = iota
	actRefresh        // report again: availability that changes with time
	actApply          // apply the desired state or carry out the tombstone, then report
)

// kick arranges for act on p after the delay, unless an apply is already due (it will use
// the latest desired state, as the real worker's queue does). While p runs, the action
// waits for it to finish. m.mu is held.
func (m *member) kick(p *placement, act action, after time.Duration) {
	switch {
	case p.running:
		p.next = max(p.next, act)
		return
	case p.timer != nil && p.timerAct >= act:
		return
	case p.timer != nil:
		if !p.timer.Stop() {
			// It fired and waits for m.mu: it will find a higher action to do.
			p.timerAct = act
			return
		}
	}
	p.timerAct = act
	p.timer = time.AfterFunc(after, func() { m.fire(p) })
}

// fire runs p's due action in a slot.
func (m *member) fire(p *placement) {
	ctx := m.f.ctx
	if !m.f.slot(ctx) {
		return
	}
	defer m.f.release()
	m.mu.Lock()
	act := p.timerAct
	if m.down() != Up {
		// Nothing is applied or reported while the member is down: Recover applies again.
		p.timer, p.timerAct, p.held = nil, actNone, true
		m.mu.Unlock()
		return
	}
	p.timer, p.timerAct, p.running = nil, actNone, true
	d, tries := p.desired, p.attempt
	m.mu.Unlock()

	now := time.Now()
	var r *events.WorkReported
	var failed bool
	switch {
	case act == actApply && d.work != nil:
		r, failed = p.apply(m, d, tries, now)
	case act == actApply && d.tomb != nil:
		r = p.delete(m, d)
	case act == actRefresh && d.work != nil:
		r = p.report(m, now)
	}
	if r != nil {
		m.publishReport(ctx, p, r)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	p.running = false
	switch {
	case act == actApply && d.work != nil && !failed:
		p.holds = true
	case act == actApply && d.tomb != nil:
		p.holds = false
	}
	if next := p.next; next != actNone {
		p.next = actNone
		delay := time.Duration(0)
		if next == actApply {
			delay = m.f.opts.ApplyDelay.Sample(m.draw("apply", p.name, strconv.FormatUint(p.desired.seq, 10), "again"))
		}
		m.kick(p, next, delay)
		return
	}
	switch {
	case failed:
		p.attempt++
		m.kick(p, actApply, m.backoff(p.attempt))
	case p.desired.seq == d.seq && d.work != nil:
		if at := p.recheckAt(); !at.IsZero() {
			m.kick(p, actRefresh, time.Until(at)+10*time.Millisecond)
		}
	}
}

// backoff is the real worker's: RetryBase·2^(attempt-1), at most RetryMax.
func (m *member) backoff(attempt int) time.Duration {
	d := m.f.opts.RetryBase
	for i := 1; i < attempt && d < m.f.opts.RetryMax; i++ {
		d *= 2
	}
	return min(d, m.f.opts.RetryMax)
}

// publishReport publishes r unless it says what the last report of the placement said,
// as the real worker's event: the simulated member publishes exactly when the worker would.
func (m *member) publishReport(ctx context.Context, p *placement, r *events.WorkReported) {
	digest := worker.ReportDigest(r)
	if p.published == digest {
		return
	}
	subject, ev, err := worker.ReportEvent(m.source, r, digest)
	if err != nil {
		m.log.Error("cannot publish a report", "placement", r.Placement, "err", err)
		return
	}
	if seq := m.f.publish(ctx, subject, ev, m.log); seq != 0 {
		m.f.stats.lastReportSeq.store(seq)
		p.published = digest
		m.f.stats.reports.Add(1)
		m.f.stats.lastReport.Store(time.Now().UnixNano())
	}
}

package bus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// How Consume waits out an outage.
const (
	// maxHealthyOutages is how many outage errors in a row the handler may return while
	// the dependencies answer before the event is failed as any other: a pool's stale
	// connections after a database restart fail once each, an event too slow for its
	// timeout fails every time.
	maxHealthyOutages = 3
	// probeTimeout bounds one check of the dependencies.
	probeTimeout = 5 * time.Second
	// probeMaxInterval caps the wait between checks while paused, so the consumer resumes
	// soon after the dependency is back.
	probeMaxInterval = 5 * time.Second
)

// attempt runs the handler on ps and returns its error, waiting out outages: while the
// handler fails with an outage and the dependencies do not answer, the consumer pauses and
// the events are retried when they do. None of this uses up a delivery.
func (w *worker) attempt(ctx context.Context, ps []pending) error {
	healthy := 0
	for {
		err := w.run(ctx, ps)
		if err == nil || ctx.Err() != nil || !IsOutage(err) {
			return err
		}
		down := w.probe(ctx)
		if ctx.Err() != nil {
			return err
		}
		if down == nil {
			if healthy++; healthy > maxHealthyOutages {
				return err
			}
			w.log.Info("handler failed on a dependency that answers; retrying in place",
				"events", len(ps), "attempt", healthy, "err", err)
			if !w.hold(ctx, pendingMsgs(ps), w.retryDelay(uint64(healthy))) {
				return err
			}
			continue
		}
		if !w.pauseUntilBack(ctx, ps, err, down) {
			return err
		}
	}
}

// run calls the handler once on ps, keeping them in progress, within the handler timeout.
func (w *worker) run(ctx context.Context, ps []pending) error {
	stop := w.keepInProgress(ps)
	defer stop()
	if w.opts.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.opts.timeout)
		defer cancel()
	}
	end, began := w.startHandling(ctx, ps), time.Now()
	err := protect(func() error { return w.handler(ctx, deliveries(ps)) })
	end(time.Since(began), err)
	return err
}

// probe checks the NATS connection and the probe of WithProbe; nil means they answer.
func (w *worker) probe(ctx context.Context) error {
	if nc := w.js.Conn(); nc != nil && nc.Status() != nats.CONNECTED {
		return fmt.Errorf("NATS: connection %s", nc.Status())
	}
	if w.opts.probe == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := protect(func() error { return w.opts.probe(ctx) }); err != nil {
		return err
	}
	return nil
}

// pauseUntilBack pauses the consumer until the dependencies answer again: the callback takes
// no more messages, and ps and whatever waits in the queue are kept in progress. It reports
// false if ctx ended first.
func (w *worker) pauseUntilBack(ctx context.Context, ps []pending, cause, down error) bool {
	w.gate.pause()
	defer w.gate.open()
	began := time.Now()
	w.log.Warn("consumer paused: a dependency is unavailable; holding the events until it answers",
		"waiting_for", down.Error(), "events", len(ps), "handler_err", cause)
	w.notifyPause(fmt.Errorf("paused until a dependency answers: %w", down))
	defer w.notifyPause(nil)
	delay := w.opts.retryBase
	touch := w.opts.inProgress
	if touch <= 0 {
		touch = probeMaxInterval
	}
	nextProbe, nextTouch := time.Now().Add(delay), time.Now()
	for {
		// Messages the callback queued before the gate closed are held too.
		for {
			msg, ok := w.nextQueued()
			if !ok {
				break
			}
			w.backlog = append(w.backlog, msg)
		}
		w.held.Store(int64(len(w.backlog)))
		if now := time.Now(); !now.Before(nextTouch) {
			w.touch(pendingMsgs(ps))
			w.touch(w.backlog)
			nextTouch = now.Add(touch)
		}
		if now := time.Now(); !now.Before(nextProbe) {
			err := w.probe(ctx)
			if err == nil {
				w.log.Info("consumer resumed: the dependency answers again", "paused_for", time.Since(began).Round(time.Millisecond))
				return true
			}
			w.log.Debug("consumer still paused", "waiting_for", err.Error(), "paused_for", time.Since(began).Round(time.Millisecond))
			delay = min(2*delay, probeMaxInterval, max(w.opts.retryMax, w.opts.retryBase))
			nextProbe = time.Now().Add(delay)
		}
		wake := nextProbe
		if nextTouch.Before(wake) {
			wake = nextTouch
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// touch tells the server that msgs are still being worked on.
func (w *worker) touch(msgs []jetstream.Msg) {
	if w.opts.inProgress <= 0 {
		return
	}
	for _, msg := range msgs {
		_ = msg.InProgress()
	}
}

// nextQueued takes a message from the queue if one waits there.
func (w *worker) nextQueued() (jetstream.Msg, bool) {
	select {
	case msg := <-w.queue:
		return msg, true
	default:
		return nil, false
	}
}

// hold waits d, keeping msgs in progress; it reports false if ctx ended first.
func (w *worker) hold(ctx context.Context, msgs []jetstream.Msg, d time.Duration) bool {
	w.touch(msgs)
	stop := w.keepMsgsInProgress(msgs)
	defer stop()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (w *worker) notifyPause(reason error) {
	if w.opts.onPause != nil {
		w.opts.onPause(reason)
	}
}

func pendingMsgs(ps []pending) []jetstream.Msg {
	out := make([]jetstream.Msg, len(ps))
	for i, p := range ps {
		out[i] = p.msg
	}
	return out
}

// holdWhilePaused queues msg while the consumer is paused, if what the pause holds stays
// within the queue's size: the pause keeps it in progress with the rest. It reports whether
// it did.
func (w *worker) holdWhilePaused(msg jetstream.Msg) bool {
	if w.gate.closed() == nil || int(w.held.Load())+len(w.queue) >= cap(w.queue) {
		return false
	}
	select {
	case w.queue <- msg:
		return true
	default:
		return false
	}
}

// waitWhilePaused holds msg, in progress, while the consumer is paused or until ctx ends.
func (w *worker) waitWhilePaused(ctx context.Context, msg jetstream.Msg) {
	for {
		resumed := w.gate.closed()
		if resumed == nil {
			return
		}
		var tick <-chan time.Time
		var t *time.Timer
		if w.opts.inProgress > 0 {
			t = time.NewTimer(w.opts.inProgress)
			tick = t.C
		}
		select {
		case <-resumed:
		case <-ctx.Done():
		case <-tick:
			_ = msg.InProgress()
			continue
		}
		if t != nil {
			t.Stop()
		}
		return
	}
}

// gate is closed while the consumer is paused.
type gate struct {
	mu sync.Mutex
	ch chan struct{} // nil while open; closed when it opens
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}

// closed returns a channel that is closed when the gate opens, or nil when it is open.
func (g *gate) closed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ch
}

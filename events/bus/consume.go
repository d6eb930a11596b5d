package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
)

// Handler processes one event. Returning nil acknowledges it; an error
// wrapped with Permanent dead-letters it; any other error retries it later.
// Deliveries can repeat, so a handler must be idempotent.
type Handler func(ctx context.Context, ev event.Event, m Meta) error

// BatchHandler processes several events in one unit of work (typically one database
// transaction), in stream order. Returning nil acknowledges them all. On an error the
// events are handled again one at a time, each as a batch of one, so that one bad event
// fails alone: for a batch of one, an error wrapped with Permanent dead-letters it and any
// other error retries it later. Deliveries can repeat, so a handler must be idempotent.
type BatchHandler func(ctx context.Context, batch []Delivery) error

// Delivery is one event of a batch and how it was delivered.
type Delivery struct {
	Event event.Event
	Meta  Meta
	// trace is the span context of the event's handling (see Context).
	trace trace.SpanContext
}

// Meta describes one delivery of a message.
type Meta struct {
	Subject  string
	Stream   string
	Consumer string
	// Sequence is the stream sequence, by which consumers order events. A redriven event
	// (see Redrive) keeps the sequence of the message it copies, so that it is as old as
	// it was and loses to anything newer.
	Sequence     uint64
	NumDelivered uint64 // 1 on the first delivery
	Time         time.Time
}

// Validator checks an event against the subject it was stored under, before
// the handler sees it: that its type is known, its payload valid, and that the
// type may travel on that subject naming what the subject names (events.Admit).
// A subject is a permission, so this is what keeps an event published with one
// member's credentials from speaking for another. An event it rejects is
// dead-lettered, never handled.
type Validator func(subject string, ev event.Event) error

// Permanent marks err as one that retrying cannot fix: Consume dead-letters
// the message instead of redelivering it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, came from Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Option configures Consume.
type Option func(*consumeOptions)

type consumeOptions struct {
	logger     *slog.Logger
	validator  Validator
	skip       func(Delivery) bool
	doubleAck  bool
	retryBase  time.Duration
	retryMax   time.Duration
	inProgress time.Duration // 0: derive from the consumer's AckWait
	maxBuffer  int
	batchCount int
	batchBytes int
	timeout    time.Duration // of one handler call; 0: none
	probe      func(context.Context) error
	onPause    func(reason error)
	observer   Observer
	tracer     trace.TracerProvider // nil: the global provider
}

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *consumeOptions) { o.logger = l }
}

// WithValidator checks each decoded event and its subject before the handler
// sees it. Consume and ConsumeBatches require one.
func WithValidator(v Validator) Option {
	return func(o *consumeOptions) { o.validator = v }
}

// WithSkip acks at once, without validating or handling them, the events skip
// says the consumer has nothing to do with: a service's own events, which it
// handled as it emitted them. skip sees the event as decoded from the message,
// its data not yet checked, so it must judge by the subject (which the
// server's permissions vouch for) and the event's attributes only.
func WithSkip(skip func(Delivery) bool) Option {
	return func(o *consumeOptions) { o.skip = skip }
}

// WithDoubleAck waits for the server to confirm each acknowledgement, which
// narrows (but cannot close) the window for a redelivery after success.
func WithDoubleAck() Option {
	return func(o *consumeOptions) { o.doubleAck = true }
}

// WithRetryDelay sets the redelivery delay after a handler error: base·2^(n-1)
// for the n-th delivery, capped at ceiling. Default 250ms and 30s.
func WithRetryDelay(base, ceiling time.Duration) Option {
	return func(o *consumeOptions) { o.retryBase, o.retryMax = base, ceiling }
}

// WithInProgressInterval sets how often a running handler's message is
// reported as in progress so the server does not redeliver it. Default a
// third of the consumer's AckWait.
func WithInProgressInterval(d time.Duration) Option {
	return func(o *consumeOptions) { o.inProgress = d }
}

// WithHandlerTimeout bounds each call of the handler: its context ends after d. A handler
// that runs out of time fails with context.DeadlineExceeded, an outage (see IsOutage).
func WithHandlerTimeout(d time.Duration) Option {
	return func(o *consumeOptions) { o.timeout = d }
}

// WithProbe tells Consume how to check the handler's dependencies (a database ping, say)
// when the handler fails with an outage: while probe fails the consumer pauses, holding the
// event, and retries it once probe passes. Consume always checks its NATS connection too.
func WithProbe(probe func(context.Context) error) Option {
	return func(o *consumeOptions) { o.probe = probe }
}

// WithPauseHook is called with the reason when the consumer pauses for an outage, and with
// nil when it resumes: a service's readiness reports it.
func WithPauseHook(f func(reason error)) Option {
	return func(o *consumeOptions) { o.onPause = f }
}

// WithMaxBuffered bounds how many messages are pulled ahead of the handler.
// Their AckWait runs while they wait, so keep it small for slow handlers.
// Default 32.
func WithMaxBuffered(n int) Option {
	return func(o *consumeOptions) { o.maxBuffer = n }
}

// WithBatchLimits bounds the batches ConsumeBatches hands its handler: at most count
// events and, beyond the first, bytes of payload. A batch is what has already arrived
// when the handler is free, so batching never waits for more. Default 100 events and
// 4 MiB.
func WithBatchLimits(count, bytes int) Option {
	return func(o *consumeOptions) { o.batchCount, o.batchBytes = count, bytes }
}

// Consume runs h for each message of the durable consumer until ctx ends,
// then stops fetching, hands back buffered messages and returns nil after the
// running handler returns. It returns an error if the consumer cannot be
// found or consumption stops on its own (the consumer was deleted, the
// connection closed).
//
// A message is dead-lettered (published to flotilla.deadletter.<consumer>
// with the reason, then terminated) when it is not a valid CloudEvent, the
// validator rejects it with its subject, the handler returns a Permanent error,
// or the handler fails on the consumer's last allowed delivery. Other handler
// errors and panics are redelivered with exponential backoff. A validator is
// required (WithValidator): no consumer runs a handler on an unchecked event.
//
// An outage is not the event's fault and uses up none of its deliveries: when the handler
// fails with an error IsOutage recognises and the dependencies do not answer (NATS, and the
// probe of WithProbe), the consumer pauses: it holds the event and what it has buffered
// (keeping them in progress), stops taking more, and retries the event once the probe
// passes. While the dependencies answer, a few outage errors in a row are retried in place
// and then count as the event's failure (an event too slow for its timeout, say).
//
// Consume waits, logging what it waits for, while NATS cannot yet tell it about the consumer.
func Consume(ctx context.Context, js jetstream.JetStream, stream, consumer string, h Handler, opts ...Option) error {
	one := func(ctx context.Context, batch []Delivery) error {
		for _, d := range batch {
			if err := h(d.Context(ctx), d.Event, d.Meta); err != nil {
				return err
			}
		}
		return nil
	}
	return consume(ctx, js, stream, consumer, one, append(opts, WithBatchLimits(1, 0)))
}

// ConsumeBatches is Consume for a handler that takes the events that are waiting
// together, in stream order and within the batch limits (WithBatchLimits): a burst of
// events costs one unit of work instead of one each. The guarantees are Consume's.
func ConsumeBatches(ctx context.Context, js jetstream.JetStream, stream, consumer string, h BatchHandler, opts ...Option) error {
	return consume(ctx, js, stream, consumer, h, opts)
}

// newConsumeOptions applies opts to the defaults.
func newConsumeOptions(opts []Option) consumeOptions {
	o := consumeOptions{
		logger:     slog.Default(),
		retryBase:  250 * time.Millisecond,
		retryMax:   30 * time.Second,
		maxBuffer:  defaultBuffered,
		batchCount: defaultBatchCount,
		batchBytes: defaultBatchBytes,
		observer:   noObserver{},
	}
	for _, opt := range opts {
		opt(&o)
	}
	o.batchCount = max(o.batchCount, 1)
	return o
}

// consumeErrors keeps the last error the client reported, and signals when pulls go
// unanswered: a pull sent after the consumer was deleted gets "no responders" and then
// missed heartbeats, which the client retries forever, so Consume checks then whether
// the consumer is gone and fails instead of idling.
type consumeErrors struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       error
	unanswered chan struct{}
}

func (e *consumeErrors) report(_ jetstream.ConsumeContext, err error) {
	e.log.Warn("consumer error", "err", err)
	e.mu.Lock()
	e.last = err
	e.mu.Unlock()
	if errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, nats.ErrNoResponders) {
		select {
		case e.unanswered <- struct{}{}:
		default:
		}
	}
}

func (e *consumeErrors) lastOr(def error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == nil {
		return def
	}
	return e.last
}

// ErrNoValidator is Consume's error when it is given no validator.
var ErrNoValidator = errors.New("no validator: every consumer checks events against their subjects (WithValidator(events.Admit))")

func consume(ctx context.Context, js jetstream.JetStream, stream, consumer string, h BatchHandler, opts []Option) error {
	o := newConsumeOptions(opts)
	if o.validator == nil {
		return fmt.Errorf("consume %s/%s: %w", stream, consumer, ErrNoValidator)
	}
	var cons jetstream.Consumer
	err := Await(ctx, o.logger, fmt.Sprintf("NATS JetStream to find consumer %s of stream %s", consumer, stream),
		func(ctx context.Context) (err error) {
			cons, err = js.Consumer(ctx, stream, consumer)
			return err
		})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("consume %s/%s: %w", stream, consumer, err)
	}
	cfg := cons.CachedInfo().Config
	if o.inProgress == 0 {
		o.inProgress = cfg.AckWait / 3
	}
	// The client's callback hands each message to the batching loop, in order; the queue
	// holds at most what the pull buffer does, and the callback waits when it is full.
	queue := make(chan jetstream.Msg, max(o.maxBuffer, o.batchCount))
	w := &worker{
		js:         js,
		handler:    h,
		opts:       o,
		log:        o.logger.With("stream", stream, "consumer", consumer),
		maxDeliver: cfg.MaxDeliver,
		queue:      queue,
	}

	errs := &consumeErrors{log: w.log, unanswered: make(chan struct{}, 1)}
	consumeOpts := []jetstream.PullConsumeOpt{jetstream.ConsumeErrHandler(errs.report)}
	if o.maxBuffer > 0 {
		consumeOpts = append(consumeOpts, jetstream.PullMaxMessages(o.maxBuffer))
	}
	loopDone := make(chan struct{})
	// The loop also ends when consumption stops on its own, with an error.
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer func() {
		stopLoop()
		<-loopDone
	}()
	go func() {
		defer close(loopDone)
		w.loop(loopCtx)
	}()
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		// While paused the callback queues what the pause can hold (and keeps in progress),
		// then holds its message and takes no more, so the client pulls no more either.
		if w.holdWhilePaused(msg) {
			return
		}
		w.waitWhilePaused(ctx, msg)
		if ctx.Err() != nil {
			w.handBack(ctx, msg)
			return
		}
		select {
		case queue <- msg:
		case <-ctx.Done():
			w.handBack(ctx, msg)
		}
	}, consumeOpts...)
	if err != nil {
		return fmt.Errorf("consume %s/%s: %w", stream, consumer, err)
	}
	closed := cc.Closed()
	for {
		select {
		case <-ctx.Done():
			// Drain runs the buffered messages through the callback, which hands them
			// back at once because ctx is done, so another instance can take them; what
			// is still queued once the running batch returns is handed back too.
			cc.Drain()
			<-closed
			<-loopDone
			for {
				msg, ok := w.nextWaiting()
				if !ok {
					return nil
				}
				w.handBack(ctx, msg)
			}
		case <-closed:
			return fmt.Errorf("consume %s/%s: %w", stream, consumer, errs.lastOr(errors.New("stopped")))
		case <-errs.unanswered:
			if _, err := cons.Info(ctx); errors.Is(err, jetstream.ErrConsumerNotFound) {
				cc.Stop()
				<-closed
				return fmt.Errorf("consume %s/%s: %w", stream, consumer, err)
			}
		}
	}
}

// shutdownRedelivery is how long a message handed back at shutdown waits
// before it is delivered again.
const shutdownRedelivery = time.Second

// defaultBuffered bounds the messages pulled ahead of the handler. Handlers
// run one at a time, so a deep buffer buys little and, at shutdown, hands
// many messages back at once.
const defaultBuffered = 32

// Default batch limits of ConsumeBatches.
const (
	defaultBatchCount = 100
	defaultBatchBytes = 4 << 20
)

// worker handles the messages of one Consume call, one at a time.
type worker struct {
	js         jetstream.JetStream
	handler    BatchHandler
	opts       consumeOptions
	log        *slog.Logger
	maxDeliver int
	queue      chan jetstream.Msg
	// backlog holds what a pause took out of the queue to keep it in progress; the loop
	// takes from it before the queue. Only the loop's goroutine touches it; held is its
	// length, for the callback.
	backlog []jetstream.Msg
	held    atomic.Int64
	gate    gate
}

// loop takes what has arrived, within the batch limits, and handles it as one batch,
// until ctx ends.
func (w *worker) loop(ctx context.Context) {
	for {
		first, ok := w.next(ctx)
		if !ok {
			return
		}
		batch, size := []jetstream.Msg{first}, len(first.Data())
		for len(batch) < w.opts.batchCount {
			msg, ok := w.nextWaiting()
			if !ok {
				break
			}
			batch = append(batch, msg)
			if size += len(msg.Data()); size >= w.opts.batchBytes {
				break
			}
		}
		w.handleBatch(ctx, batch)
	}
}

// next returns the next message, waiting for one until ctx ends.
func (w *worker) next(ctx context.Context) (jetstream.Msg, bool) {
	if msg, ok := w.nextWaiting(); ok {
		return msg, true
	}
	select {
	case msg := <-w.queue:
		return msg, true
	case <-ctx.Done():
		return nil, false
	}
}

// nextWaiting returns the next message if one is waiting.
func (w *worker) nextWaiting() (jetstream.Msg, bool) {
	if len(w.backlog) > 0 {
		msg := w.backlog[0]
		w.backlog[0] = nil
		w.backlog = w.backlog[1:]
		w.held.Store(int64(len(w.backlog)))
		return msg, true
	}
	select {
	case msg := <-w.queue:
		return msg, true
	default:
		return nil, false
	}
}

// pending is a message of a batch that passed decoding and validation.
type pending struct {
	msg jetstream.Msg
	d   Delivery
}

// handleBatch settles every message of msgs: acked, retried or dead-lettered.
func (w *worker) handleBatch(ctx context.Context, msgs []jetstream.Msg) {
	var ready []pending
	for _, msg := range msgs {
		if p, ok := w.admit(ctx, msg); ok {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return
	}
	if len(ready) > 1 {
		err := w.attempt(ctx, ready)
		if err == nil {
			for _, p := range ready {
				w.ack(ctx, p.msg, p.d.Meta)
			}
			return
		}
		if ctx.Err() != nil {
			for _, p := range ready {
				w.handBack(ctx, p.msg)
			}
			return
		}
		w.log.Debug("batch failed; handling its events one at a time", "events", len(ready), "err", err)
	}
	for _, p := range ready {
		w.handleOne(ctx, p)
	}
}

func deliveries(ps []pending) []Delivery {
	out := make([]Delivery, len(ps))
	for i, p := range ps {
		out[i] = p.d
	}
	return out
}

// admit decodes and validates msg; a message that cannot be handled is settled here.
func (w *worker) admit(ctx context.Context, msg jetstream.Msg) (pending, bool) {
	md, err := msg.Metadata()
	if err != nil {
		// Not a JetStream delivery: nothing to ack or dead-letter.
		w.log.Error("message without JetStream metadata", "subject", msg.Subject(), "err", err)
		return pending{}, false
	}
	m := Meta{
		Subject:      msg.Subject(),
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Sequence:     md.Sequence.Stream,
		NumDelivered: md.NumDelivered,
		Time:         md.Timestamp,
	}
	if seq, ok := redrivenSequence(msg.Headers(), m.Sequence); ok {
		m.Sequence = seq
	}
	if ctx.Err() != nil {
		w.handBack(ctx, msg)
		return pending{}, false
	}
	ev, err := DecodeJetStream(msg)
	if err != nil {
		w.deadLetter(ctx, msg, m, fmt.Sprintf("The message is not a valid CloudEvent: %v.", err))
		return pending{}, false
	}
	if w.opts.skip != nil && w.opts.skip(Delivery{Event: ev, Meta: m}) {
		w.ack(ctx, msg, m)
		return pending{}, false
	}
	err = protect(func() error { return w.opts.validator(m.Subject, ev) })
	var pe *panicError
	switch {
	case errors.As(err, &pe):
		w.retry(ctx, msg, m, ev, err)
		return pending{}, false
	case err != nil:
		w.deadLetter(ctx, msg, m, fmt.Sprintf("Event %s of type %q on %s was rejected: %v.", ev.ID(), ev.Type(), m.Subject, err))
		return pending{}, false
	}
	return pending{msg: msg, d: Delivery{Event: ev, Meta: m}}, true
}

// handleOne runs the handler on one event and settles it.
func (w *worker) handleOne(ctx context.Context, p pending) {
	err := w.attempt(ctx, []pending{p})
	ev, m := p.d.Event, p.d.Meta
	switch {
	case err == nil:
		w.ack(ctx, p.msg, m)
	case ctx.Err() != nil && IsOutage(err):
		// Stopped while waiting out an outage: not the event's failure.
		w.handBack(ctx, p.msg)
	case IsPermanent(err):
		w.deadLetter(ctx, p.msg, m, fmt.Sprintf("Handling event %s of type %q failed permanently: %v.", ev.ID(), ev.Type(), err))
	default:
		w.retry(ctx, p.msg, m, ev, err)
	}
}

// handBack returns a message at shutdown so another instance can take it now, unless the
// server would then drop it.
func (w *worker) handBack(ctx context.Context, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		return
	}
	if w.maxDeliver > 0 && md.NumDelivered >= uint64(w.maxDeliver) {
		m := Meta{Subject: msg.Subject(), Stream: md.Stream, Consumer: md.Consumer, Sequence: md.Sequence.Stream,
			NumDelivered: md.NumDelivered, Time: md.Timestamp}
		w.deadLetter(ctx, msg, m, fmt.Sprintf("The consumer stopped while the message was on its last allowed delivery (%d).", md.NumDelivered))
		return
	}
	// A short delay, so that replicas stopping together (a rolling restart) do not
	// bounce it between them and use up its deliveries.
	_ = msg.NakWithDelay(shutdownRedelivery)
}

func (w *worker) ack(ctx context.Context, msg jetstream.Msg, m Meta) {
	var err error
	if w.opts.doubleAck {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = msg.DoubleAck(actx)
		cancel()
	} else {
		err = msg.Ack()
	}
	if err != nil {
		// The message will be redelivered; handlers are idempotent.
		w.log.Warn("ack failed", "subject", m.Subject, "sequence", m.Sequence, "err", err)
	}
	w.settled(msg, m.Consumer, Acked)
}

// retry hands the message back for a later delivery, or dead-letters it when
// this was the last delivery the consumer allows: the server would otherwise
// drop it silently.
func (w *worker) retry(ctx context.Context, msg jetstream.Msg, m Meta, ev event.Event, err error) {
	var pe *panicError
	if errors.As(err, &pe) {
		w.log.Error("handler panicked", "subject", m.Subject, "sequence", m.Sequence, "event_id", ev.ID(),
			"panic", pe.value, "stack", string(pe.stack))
	}
	if w.lastDelivery(m) {
		w.deadLetter(ctx, msg, m, fmt.Sprintf("Handling event %s of type %q failed on all %d deliveries; last error: %v.",
			ev.ID(), ev.Type(), m.NumDelivered, err))
		return
	}
	if ctx.Err() != nil {
		// Shutting down: let another instance have it now.
		_ = msg.Nak()
		return
	}
	delay := w.retryDelay(m.NumDelivered)
	w.log.Warn("handler failed, will retry",
		"subject", m.Subject, "sequence", m.Sequence, "event_id", ev.ID(), "event_type", ev.Type(),
		"delivered", m.NumDelivered, "retry_in", delay, "err", err)
	if err := msg.NakWithDelay(delay); err != nil {
		w.log.Warn("nak failed", "subject", m.Subject, "sequence", m.Sequence, "err", err)
	}
	w.settled(msg, m.Consumer, Retried)
}

// lastDelivery reports whether the server will not deliver m again.
func (w *worker) lastDelivery(m Meta) bool {
	return w.maxDeliver > 0 && m.NumDelivered >= uint64(w.maxDeliver)
}

// retryDelay is base·2^(delivered-1), capped.
func (w *worker) retryDelay(delivered uint64) time.Duration {
	d := w.opts.retryBase
	for i := uint64(1); i < delivered && d < w.opts.retryMax; i++ {
		d *= 2
	}
	return min(d, w.opts.retryMax)
}

// keepInProgress tells the server the messages are still being worked on every
// interval until the returned stop is called.
func (w *worker) keepInProgress(ps []pending) (stop func()) {
	return w.keepMsgsInProgress(pendingMsgs(ps))
}

// keepMsgsInProgress is keepInProgress for messages.
func (w *worker) keepMsgsInProgress(msgs []jetstream.Msg) (stop func()) {
	if w.opts.inProgress <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(w.opts.inProgress)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, msg := range msgs {
					_ = msg.InProgress()
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// protect runs f, turning a panic into an error so one bad message cannot
// crash the service.
func protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return f()
}

package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Handler processes one event. Returning nil acknowledges it; an error
// wrapped with Permanent dead-letters it; any other error retries it later.
// Deliveries can repeat, so a handler must be idempotent.
type Handler func(ctx context.Context, ev event.Event, m Meta) error

// Meta describes one delivery of a message.
type Meta struct {
	Subject      string
	Stream       string
	Consumer     string
	Sequence     uint64 // stream sequence
	NumDelivered uint64 // 1 on the first delivery
	Time         time.Time
}

// Validator checks an event before it reaches the handler, for example that
// its type is known and its payload valid. An event it rejects is
// dead-lettered.
type Validator func(event.Event) error

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
	doubleAck  bool
	retryBase  time.Duration
	retryMax   time.Duration
	inProgress time.Duration // 0: derive from the consumer's AckWait
	maxBuffer  int
}

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *consumeOptions) { o.logger = l }
}

// WithValidator checks each decoded event before the handler sees it.
func WithValidator(v Validator) Option {
	return func(o *consumeOptions) { o.validator = v }
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

// WithMaxBuffered bounds how many messages are pulled ahead of the handler.
// Their AckWait runs while they wait, so keep it small for slow handlers.
// Default 32.
func WithMaxBuffered(n int) Option {
	return func(o *consumeOptions) { o.maxBuffer = n }
}

// Consume runs h for each message of the durable consumer until ctx ends,
// then stops fetching, hands back buffered messages and returns nil after the
// running handler returns. It returns an error if the consumer cannot be
// found or consumption stops on its own (the consumer was deleted, the
// connection closed).
//
// A message is dead-lettered (published to flotilla.deadletter.<consumer>
// with the reason, then terminated) when it is not a valid CloudEvent, the
// validator rejects it, the handler returns a Permanent error, or the handler
// fails on the consumer's last allowed delivery. Other handler errors and
// panics are redelivered with exponential backoff.
func Consume(ctx context.Context, js jetstream.JetStream, stream, consumer string, h Handler, opts ...Option) error {
	o := consumeOptions{
		logger:    slog.Default(),
		retryBase: 250 * time.Millisecond,
		retryMax:  30 * time.Second,
		maxBuffer: defaultBuffered,
	}
	for _, opt := range opts {
		opt(&o)
	}
	cons, err := js.Consumer(ctx, stream, consumer)
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
	w := &worker{
		js:         js,
		handler:    h,
		opts:       o,
		log:        o.logger.With("stream", stream, "consumer", consumer),
		maxDeliver: cfg.MaxDeliver,
	}

	var (
		mu      sync.Mutex
		lastErr error
	)
	// A pull sent after the consumer was deleted gets "no responders" and
	// then missed heartbeats, which the client retries forever; check then
	// whether the consumer is gone so the service fails instead of idling.
	unanswered := make(chan struct{}, 1)
	consumeOpts := []jetstream.PullConsumeOpt{
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			w.log.Warn("consumer error", "err", err)
			mu.Lock()
			lastErr = err
			mu.Unlock()
			if errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, nats.ErrNoResponders) {
				select {
				case unanswered <- struct{}{}:
				default:
				}
			}
		}),
	}
	if o.maxBuffer > 0 {
		consumeOpts = append(consumeOpts, jetstream.PullMaxMessages(o.maxBuffer))
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) { w.handle(ctx, msg) }, consumeOpts...)
	if err != nil {
		return fmt.Errorf("consume %s/%s: %w", stream, consumer, err)
	}
	closed := cc.Closed()
	for {
		select {
		case <-ctx.Done():
			// Drain runs the buffered messages through handle, which Naks
			// them at once because ctx is done, so another instance can take
			// them.
			cc.Drain()
			<-closed
			return nil
		case <-closed:
			mu.Lock()
			defer mu.Unlock()
			if lastErr == nil {
				lastErr = errors.New("stopped")
			}
			return fmt.Errorf("consume %s/%s: %w", stream, consumer, lastErr)
		case <-unanswered:
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

// worker handles the messages of one Consume call, one at a time.
type worker struct {
	js         jetstream.JetStream
	handler    Handler
	opts       consumeOptions
	log        *slog.Logger
	maxDeliver int
}

func (w *worker) handle(ctx context.Context, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		// Not a JetStream delivery: nothing to ack or dead-letter.
		w.log.Error("message without JetStream metadata", "subject", msg.Subject(), "err", err)
		return
	}
	m := Meta{
		Subject:      msg.Subject(),
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Sequence:     md.Sequence.Stream,
		NumDelivered: md.NumDelivered,
		Time:         md.Timestamp,
	}
	if ctx.Err() != nil {
		// Shutting down: hand the message back so another instance can take
		// it now, unless the server would then drop it.
		if w.lastDelivery(m) {
			w.deadLetter(ctx, msg, m, fmt.Sprintf("The consumer stopped while the message was on its last allowed delivery (%d).", m.NumDelivered))
			return
		}
		// A short delay, so that replicas stopping together (a rolling
		// restart) do not bounce it between them and use up its deliveries.
		_ = msg.NakWithDelay(shutdownRedelivery)
		return
	}

	ev, err := DecodeJetStream(msg)
	if err != nil {
		w.deadLetter(ctx, msg, m, fmt.Sprintf("The message is not a valid CloudEvent: %v.", err))
		return
	}
	if w.opts.validator != nil {
		err := protect(func() error { return w.opts.validator(ev) })
		var pe *panicError
		switch {
		case errors.As(err, &pe):
			w.retry(ctx, msg, m, ev, err)
			return
		case err != nil:
			w.deadLetter(ctx, msg, m, fmt.Sprintf("Event %s of type %q was rejected: %v.", ev.ID(), ev.Type(), err))
			return
		}
	}

	stop := w.keepInProgress(msg)
	err = protect(func() error { return w.handler(ctx, ev, m) })
	stop()

	switch {
	case err == nil:
		w.ack(ctx, msg, m)
	case IsPermanent(err):
		w.deadLetter(ctx, msg, m, fmt.Sprintf("Handling event %s of type %q failed permanently: %v.", ev.ID(), ev.Type(), err))
	default:
		w.retry(ctx, msg, m, ev, err)
	}
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

// keepInProgress tells the server the message is still being worked on every
// interval until the returned stop is called.
func (w *worker) keepInProgress(msg jetstream.Msg) (stop func()) {
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
				_ = msg.InProgress()
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

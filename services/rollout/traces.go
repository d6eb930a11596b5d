package rollout

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// maxTraces bounds the placements whose trace the rollout remembers.
const maxTraces = 10000

// traces remembers, per placement, the trace of the last event that
// reconciled it or set one of its timers, so that what a timer sends later
// (the snapshot cut when the coalescing window ends, the next wave of a
// rollout) carries on the trace of the change that caused it. It is memory
// only: after a restart, or when another replica fires the timer, that work
// starts a trace of its own.
type traces struct {
	mu sync.Mutex
	m  map[string]trace.SpanContext
}

// remember keeps the trace of ctx, if any, for placement.
func (t *traces) remember(ctx context.Context, placement string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]trace.SpanContext{}
	}
	if _, ok := t.m[placement]; !ok && len(t.m) >= maxTraces {
		for k := range t.m { // forget one: a trace is worth less than the bound
			delete(t.m, k)
			break
		}
	}
	t.m[placement] = sc
}

// context returns ctx within the trace remembered for placement, if any.
func (t *traces) context(ctx context.Context, placement string) context.Context {
	t.mu.Lock()
	sc, ok := t.m[placement]
	t.mu.Unlock()
	if !ok {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

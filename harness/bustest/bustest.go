// Package bustest runs, for tests, what a service runs on the bus. It imports
// the events contract only, so the contract's own tests can use it.
package bustest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Consume runs h on the durable consumer of stream until the test ends, as a
// service would: events are validated, a failed one is retried after 50 to
// 200ms, and Consume returning an error fails the test.
func Consume(t testing.TB, js jetstream.JetStream, stream, consumer string, h bus.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	go func() {
		done <- bus.Consume(ctx, js, stream, consumer, h,
			bus.WithValidator(events.Admit), bus.WithLogger(log), bus.WithRetryDelay(50*time.Millisecond, 200*time.Millisecond))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consume %s: %v", consumer, err)
		}
	})
}

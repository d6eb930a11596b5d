// Package platformtest runs the consume helper for the platform packages' tests.
package platformtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Consume runs h on a durable consumer of stream until the test ends, with short retry delays.
func Consume(t *testing.T, js jetstream.JetStream, stream, consumer string, h bus.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	go func() {
		done <- bus.Consume(ctx, js, stream, consumer, h,
			bus.WithValidator(events.Validate), bus.WithLogger(log), bus.WithRetryDelay(50*time.Millisecond, 200*time.Millisecond))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consume %s: %v", consumer, err)
		}
	})
}

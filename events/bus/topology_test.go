package bus_test

import (
	"fmt"
	"testing"

	"github.com/flotilla-dev/flotilla/events/bus"
)

// TestWorkStreamTakesMoreThanAThousandMembers: NATS allows a stream 1,000 consumers unless
// it says otherwise; the work stream takes the 1,001st member's worker.
func TestWorkStreamTakesMoreThanAThousandMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 1,001 consumers")
	}
	_, js := startBus(t, bus.TopologyOptions{})
	for i := range 1001 {
		if _, err := bus.EnsureApplyConsumer(t.Context(), js, fmt.Sprintf("member-%d", i), bus.TopologyOptions{}); err != nil {
			t.Fatalf("the worker of member %d gets no consumer: %v", i+1, err)
		}
	}
}

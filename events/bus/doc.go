// Package bus carries Flotilla's CloudEvents over NATS JetStream.
//
// It holds the wire codec (CloudEvents binary mode in NATS headers), the
// stream and consumer topology (topology.go is the only place they are
// declared), a publisher that deduplicates by event id, and a consume loop
// with bounded retries and a dead-letter stream, so a message that can never
// be processed is recorded with its reason instead of blocking a consumer.
//
// An outage is not a message's fault: a handler failing because a dependency
// is out of reach (IsOutage) pauses its consumer until the dependency answers,
// without using up the message's deliveries (outage.go, pause.go). Dead letters
// can be listed, shown and redriven (redrive.go), which is what fleetctl
// deadletters does.
package bus

package outbox

// The advisory lock classes, for tests that watch who holds what.
const (
	LockPartition = lockPartition
	LockRelay     = lockRelay
)

// WireSize is what NATS counts of a message against max_payload.
var WireSize = wireSize

package outbox

// The advisory lock classes, for tests that watch who holds what.
const (
	LockPartition = lockPartition
	LockRelay     = lockRelay
)

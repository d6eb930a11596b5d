package bus

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamLimits bound what the streams store, so that JetStream cannot fill up: every
// stream has a byte limit (reserved on each server holding it, so their sum must fit the
// server's max_file_store), and the streams an apply worker may publish into (EVENTS, on
// flotilla.member.<c> and flotilla.workstatus.<c>.>, and DEADLETTER, on
// flotilla.deadletter.apply-<c>) bound each subject's messages and each message's size,
// which bounds what one member's credentials can store on each of its subjects.
//
// What happens at a limit depends on what the stream holds. History (EVENTS, DEADLETTER,
// ADVISORIES) drops its oldest messages: a flood ages out old events rather than
// stopping the fleet. Desired state and blobs (WORK, WORKBLOBS, HUBBLOBS) refuse new
// messages instead: WORK keeps exactly the last message per subject and must never lose
// one (a worker rebuilds from it), so when it is full a new (cluster, placement) is
// refused while a subject's replacement that is no larger still goes in. WORK and
// WORKBLOBS have no age limit for the same reason; the rollout purges blobs that newer
// work replaced.
//
// The zero value gives DefaultStreamLimits; a negative value removes a limit. Streams kept
// in memory (tests) have each byte limit capped at MemoryStreamMaxBytes.
type StreamLimits struct {
	EventsMaxBytes          int64
	EventsMaxMsgSize        int32
	EventsMaxMsgsPerSubject int64

	WorkMaxBytes      int64
	WorkMaxMsgSize    int32
	WorkBlobsMaxBytes int64
	HubBlobsMaxBytes  int64

	DeadLetterMaxBytes          int64
	DeadLetterMaxMsgsPerSubject int64
	AdvisoriesMaxBytes          int64
}

// MemoryStreamMaxBytes caps the byte limits of streams kept in memory.
const MemoryStreamMaxBytes = 64 << 20

// DefaultStreamLimits reserve about 4.3 GiB in all on each server holding the streams (the
// server's max_file_store must have room: deploy/kubernetes sets 8 GB). At scale the
// events stream's bytes bind before its age: heartbeats dominate it, about 1 KiB per
// member per heartbeat period.
var DefaultStreamLimits = StreamLimits{
	EventsMaxBytes: 2 << 30,
	// NATS's default max_payload: raise both together.
	EventsMaxMsgSize: 1 << 20,
	// A week of heartbeats every 15 s on a member's subject, with room to spare.
	EventsMaxMsgsPerSubject: 50_000,

	WorkMaxBytes: 512 << 20,
	// Inline work carries at most events.InlineManifestsBytes of manifests.
	WorkMaxMsgSize:    1 << 20,
	WorkBlobsMaxBytes: 1 << 30,
	HubBlobsMaxBytes:  512 << 20,

	DeadLetterMaxBytes:          256 << 20,
	DeadLetterMaxMsgsPerSubject: 10_000,
	AdvisoriesMaxBytes:          64 << 20,
}

func (l StreamLimits) withDefaults() StreamLimits {
	d := DefaultStreamLimits
	pick := func(v *int64, def int64) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = -1
		}
	}
	pick(&l.EventsMaxBytes, d.EventsMaxBytes)
	pick(&l.EventsMaxMsgsPerSubject, d.EventsMaxMsgsPerSubject)
	pick(&l.WorkMaxBytes, d.WorkMaxBytes)
	pick(&l.WorkBlobsMaxBytes, d.WorkBlobsMaxBytes)
	pick(&l.HubBlobsMaxBytes, d.HubBlobsMaxBytes)
	pick(&l.DeadLetterMaxBytes, d.DeadLetterMaxBytes)
	pick(&l.DeadLetterMaxMsgsPerSubject, d.DeadLetterMaxMsgsPerSubject)
	pick(&l.AdvisoriesMaxBytes, d.AdvisoriesMaxBytes)
	for _, s := range []struct {
		v   *int32
		def int32
	}{{&l.EventsMaxMsgSize, d.EventsMaxMsgSize}, {&l.WorkMaxMsgSize, d.WorkMaxMsgSize}} {
		switch {
		case *s.v == 0:
			*s.v = s.def
		case *s.v < 0:
			*s.v = -1
		}
	}
	return l
}

// apply sets the limits of the stream cfg declares.
func (l StreamLimits) apply(cfg *jetstream.StreamConfig) {
	l = l.withDefaults()
	defer func() {
		if cfg.Storage == jetstream.MemoryStorage && (cfg.MaxBytes < 0 || cfg.MaxBytes > MemoryStreamMaxBytes) {
			cfg.MaxBytes = MemoryStreamMaxBytes
		}
	}()
	switch cfg.Name {
	case StreamEvents:
		cfg.MaxBytes, cfg.MaxMsgSize, cfg.MaxMsgsPerSubject = l.EventsMaxBytes, l.EventsMaxMsgSize, l.EventsMaxMsgsPerSubject
		cfg.Discard = jetstream.DiscardOld
	case StreamWork:
		// MaxMsgsPerSubject stays 1: the last value per subject.
		cfg.MaxBytes, cfg.MaxMsgSize = l.WorkMaxBytes, l.WorkMaxMsgSize
		cfg.Discard = jetstream.DiscardNew
	case StreamWorkBlobs:
		cfg.MaxBytes, cfg.Discard = l.WorkBlobsMaxBytes, jetstream.DiscardNew
	case StreamHubBlobs:
		cfg.MaxBytes, cfg.Discard = l.HubBlobsMaxBytes, jetstream.DiscardNew
	case StreamDeadLetter:
		// No MaxMsgSize: a dead letter that could not be stored would be
		// retried for ever. Its size is bounded by the server's max_payload.
		cfg.MaxBytes, cfg.MaxMsgsPerSubject = l.DeadLetterMaxBytes, l.DeadLetterMaxMsgsPerSubject
		cfg.Discard = jetstream.DiscardOld
	case StreamAdvisories:
		cfg.MaxBytes, cfg.Discard = l.AdvisoriesMaxBytes, jetstream.DiscardOld
	}
}

// jsErrCodeStorageResourcesExceeded is JetStream's "insufficient storage resources
// available": a stream's MaxBytes does not fit what the server has left to reserve.
const jsErrCodeStorageResourcesExceeded jetstream.ErrorCode = 10047

// storageHint explains a refused stream whose byte limit the server cannot reserve.
func storageHint(cfg jetstream.StreamConfig, err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == jsErrCodeStorageResourcesExceeded {
		return fmt.Errorf("%w (the stream's limit of %d bytes is reserved on the server: lower it, see bus.StreamLimits and the services' --*-max-bytes flags, or give the server a larger max_file_store)", err, cfg.MaxBytes)
	}
	return err
}

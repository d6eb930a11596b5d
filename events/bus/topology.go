package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// This file is the only place streams and consumers are declared.

// Stream names.
const (
	// StreamEvents holds the event history: placement, member, hub,
	// scheduling, work status, rollout, status and outbox events.
	StreamEvents = "EVENTS"
	// StreamWork holds the desired state per (cluster, placement): only the
	// last message per subject is kept.
	StreamWork = "WORK"
	// StreamDeadLetter holds messages consumers gave up on, with the reason.
	StreamDeadLetter = "DEADLETTER"
)

// blobMaxMsgSize bounds a blob stream's messages: a chunk and its headers.
const blobMaxMsgSize = BlobChunkBytes + 4<<10

// Durable consumer names on StreamEvents. Apply workers use ApplyConsumerName.
const (
	ConsumerScheduler = "scheduler"
	ConsumerRollout   = "rollout"
	ConsumerStatus    = "status" // every event: it writes the audit log
)

// Subject patterns of the streams.
const (
	SubjectsPlacement = "flotilla.placement.>"
	SubjectsMember    = "flotilla.member.>"
	SubjectsHub       = "flotilla.hub.>"
	SubjectsOverride  = "flotilla.override.>"
	// SubjectsStagedUpdate carries staged update strategies, runs and approvals.
	SubjectsStagedUpdate = "flotilla.stagedupdate.>"
	// SubjectsDisruption carries evictions and disruption budgets.
	SubjectsDisruption = "flotilla.disruption.>"
	SubjectsScheduling = "flotilla.scheduling.>"
	SubjectsWorkStatus = "flotilla.workstatus.>"
	SubjectsRollout    = "flotilla.rollout.>"
	SubjectsStatus     = "flotilla.status.>"
	SubjectsOutbox     = "flotilla.outbox.>"
	SubjectsWork       = "flotilla.work.>"
	SubjectsDeadLetter = "flotilla.deadletter.>"

	// SubjectWorkPrefix is followed by <cluster>.<placement> (see WorkSubject).
	SubjectWorkPrefix = "flotilla.work."
	// SubjectDeadLetterPrefix is followed by the consumer name.
	SubjectDeadLetterPrefix = "flotilla.deadletter."
)

// TopologyOptions tunes the topology. The zero value gives the defaults.
type TopologyOptions struct {
	// EventsMaxAge is how long StreamEvents keeps events. Default 7 days.
	EventsMaxAge time.Duration
	// DeadLetterMaxAge is how long StreamDeadLetter keeps messages. Default 30 days.
	DeadLetterMaxAge time.Duration
	// Duplicates is the window in which a repeated Nats-Msg-Id is dropped.
	// Default 2 minutes.
	Duplicates time.Duration
	// Storage of all streams. Default file storage.
	Storage jetstream.StorageType
	// Replicas of all streams. Default 1.
	Replicas int

	// AckWait is how long a delivered message may stay unacknowledged before
	// it is redelivered. Default 30 seconds.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of a message; after the last one the
	// consume loop dead-letters it. Default 10.
	MaxDeliver int
	// MaxAckPending bounds unacknowledged messages per consumer. Default 1000.
	MaxAckPending int
	// MaxWorkConsumers bounds the consumers on StreamWork: each member's worker holds one,
	// and one more while it replays at start. NATS allows 1,000 per stream unless the stream
	// says otherwise. Default 20,000 (10,000 members).
	MaxWorkConsumers int
	// Limits bound each stream's bytes, and per subject and message where a
	// member can publish (see StreamLimits).
	Limits StreamLimits
}

// DefaultTopology is the topology's default tuning.
var DefaultTopology = TopologyOptions{
	EventsMaxAge:     7 * 24 * time.Hour,
	DeadLetterMaxAge: 30 * 24 * time.Hour,
	Duplicates:       2 * time.Minute,
	Storage:          jetstream.FileStorage,
	Replicas:         1,
	AckWait:          30 * time.Second,
	MaxDeliver:       10,
	MaxAckPending:    1000,
	MaxWorkConsumers: 20_000,
}

func (o TopologyOptions) withDefaults() TopologyOptions {
	d := DefaultTopology
	if o.EventsMaxAge == 0 {
		o.EventsMaxAge = d.EventsMaxAge
	}
	if o.DeadLetterMaxAge == 0 {
		o.DeadLetterMaxAge = d.DeadLetterMaxAge
	}
	if o.Duplicates == 0 {
		o.Duplicates = d.Duplicates
	}
	if o.Replicas == 0 {
		o.Replicas = d.Replicas
	}
	if o.AckWait == 0 {
		o.AckWait = d.AckWait
	}
	if o.MaxDeliver == 0 {
		o.MaxDeliver = d.MaxDeliver
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = d.MaxAckPending
	}
	if o.MaxWorkConsumers == 0 {
		o.MaxWorkConsumers = d.MaxWorkConsumers
	}
	return o
}

// Streams returns the stream configurations, with their limits.
func (o TopologyOptions) Streams() []jetstream.StreamConfig {
	streams := o.streams()
	for i := range streams {
		o.Limits.apply(&streams[i])
	}
	return streams
}

func (o TopologyOptions) streams() []jetstream.StreamConfig {
	o = o.withDefaults()
	return []jetstream.StreamConfig{
		{
			Name:        StreamEvents,
			Description: "Flotilla events",
			Subjects: []string{
				SubjectsPlacement, SubjectsMember, SubjectsHub, SubjectsOverride, SubjectsStagedUpdate, SubjectsDisruption, SubjectsScheduling,
				SubjectsWorkStatus, SubjectsRollout, SubjectsStatus, SubjectsOutbox,
			},
			Retention:  jetstream.LimitsPolicy,
			Storage:    o.Storage,
			Replicas:   o.Replicas,
			MaxAge:     o.EventsMaxAge,
			Duplicates: o.Duplicates,
		},
		{
			Name:        StreamWork,
			Description: "Desired state per cluster and placement (last value per subject)",
			Subjects:    []string{SubjectsWork},
			Retention:   jetstream.LimitsPolicy,
			Storage:     o.Storage,
			Replicas:    o.Replicas,
			// One message per flotilla.work.<cluster>.<placement>: the current
			// desired state or its tombstone. A restarted apply worker rebuilds
			// from this set alone, so it must never age out.
			MaxMsgsPerSubject: 1,
			MaxConsumers:      o.MaxWorkConsumers,
			Duplicates:        o.Duplicates,
		},
		{
			Name:        StreamWorkBlobs,
			Description: "Manifests of work too large to travel inline, per cluster and placement (see BlobRef)",
			Subjects:    []string{SubjectsWorkBlobs},
			Retention:   jetstream.LimitsPolicy,
			Storage:     o.Storage,
			Replicas:    o.Replicas,
			// A chunk's subject names its digest: one message each. The rollout
			// purges a digest some time after newer work replaced it.
			MaxMsgsPerSubject: 1,
			MaxMsgSize:        blobMaxMsgSize,
			AllowDirect:       true,
			Duplicates:        o.Duplicates,
		},
		{
			Name:              StreamHubBlobs,
			Description:       "Hub objects too large to travel inline (see BlobRef), kept as long as events",
			Subjects:          []string{SubjectsHubBlobs},
			Retention:         jetstream.LimitsPolicy,
			Storage:           o.Storage,
			Replicas:          o.Replicas,
			MaxAge:            o.EventsMaxAge,
			MaxMsgsPerSubject: 1,
			MaxMsgSize:        blobMaxMsgSize,
			AllowDirect:       true,
			Duplicates:        o.Duplicates,
		},
		{
			Name:        StreamDeadLetter,
			Description: "Messages consumers gave up on, with the reason in headers",
			Subjects:    []string{SubjectsDeadLetter},
			Retention:   jetstream.LimitsPolicy,
			Storage:     o.Storage,
			Replicas:    o.Replicas,
			MaxAge:      o.DeadLetterMaxAge,
			Duplicates:  o.Duplicates,
		},
		{
			Name:        StreamAdvisories,
			Description: "Advisories of messages whose deliveries ran out without an acknowledgement",
			Subjects:    []string{SubjectsMaxDeliveries},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     o.Storage,
			Replicas:    o.Replicas,
			MaxAge:      o.DeadLetterMaxAge,
		},
	}
}

// Consumers returns the durable consumers on StreamEvents.
func (o TopologyOptions) Consumers() []jetstream.ConsumerConfig {
	return []jetstream.ConsumerConfig{
		o.consumer(ConsumerScheduler, "Scheduler: placements, members, evictions and disruption budgets",
			jetstream.DeliverAllPolicy, SubjectsPlacement, SubjectsMember, SubjectsDisruption),
		o.consumer(ConsumerRollout, "Rollout: placements, hub resources, overrides, staged updates, decisions, work status, members",
			jetstream.DeliverAllPolicy, SubjectsPlacement, SubjectsHub, SubjectsOverride, SubjectsStagedUpdate, SubjectsScheduling, SubjectsWorkStatus, SubjectsMember),
		// No filter: the status service records every event in the audit log.
		o.consumer(ConsumerStatus, "Status: every event",
			jetstream.DeliverAllPolicy),
	}
}

// ApplyConsumerName is the durable consumer of one cluster's apply worker.
func ApplyConsumerName(cluster string) (string, error) {
	tok, err := SubjectToken(cluster)
	if err != nil {
		return "", fmt.Errorf("apply consumer name: %w", err)
	}
	return ApplyUserPrefix + tok, nil
}

// ApplyConsumerConfig is the durable consumer of one cluster's apply worker on
// StreamWork, filtered to flotilla.work.<cluster>.>, with default tuning.
func ApplyConsumerConfig(cluster string) (jetstream.ConsumerConfig, error) {
	return TopologyOptions{}.ApplyConsumerConfig(cluster)
}

// ApplyConsumerConfig is the durable consumer of one cluster's apply worker on
// StreamWork, filtered to flotilla.work.<cluster>.>.
func (o TopologyOptions) ApplyConsumerConfig(cluster string) (jetstream.ConsumerConfig, error) {
	name, err := ApplyConsumerName(cluster)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	tok, _ := SubjectToken(cluster) // valid: ApplyConsumerName checked it
	// Last per subject: the current desired state of each placement, which is
	// all a new worker needs (the stream keeps nothing older anyway).
	cfg := o.consumer(name, "Apply worker for cluster "+cluster, jetstream.DeliverLastPerSubjectPolicy)
	// One filter, not FilterSubjects: the client then names it in the create
	// request's subject, where the server can enforce a worker's permission
	// to consume its own cluster's work only.
	cfg.FilterSubject = SubjectWorkPrefix + tok + ".>"
	return cfg, nil
}

// consumer declares a durable consumer. It sets no BackOff: the server
// measures a NakWithDelay from the delivery's BackOff step rather than from
// AckWait (consumer.go processNak/checkPending in nats-server 2.15), so with
// BackOff every retry after the first would wait BackOff[n]-AckWait longer
// than asked. Consume paces retries with NakWithDelay instead, and keeps
// long handlers alive with InProgress, so AckWait only matters when a
// process dies mid-message.
func (o TopologyOptions) consumer(name, description string, deliver jetstream.DeliverPolicy, filters ...string) jetstream.ConsumerConfig {
	o = o.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:        name,
		Description:    description,
		DeliverPolicy:  deliver,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        o.AckWait,
		MaxDeliver:     o.MaxDeliver,
		MaxAckPending:  o.MaxAckPending,
		FilterSubjects: filters,
	}
}

// EnsureTopology creates or updates the streams and the durable consumers on
// StreamEvents. It is idempotent. Apply workers create their own consumer
// with ApplyConsumerConfig.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, opts TopologyOptions) error {
	for _, cfg := range opts.Streams() {
		if err := ensureStream(ctx, js, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, storageHint(cfg, err))
		}
	}
	for _, cfg := range opts.Consumers() {
		if _, err := js.CreateOrUpdateConsumer(ctx, StreamEvents, cfg); err != nil {
			return fmt.Errorf("ensure consumer %s on %s: %w", cfg.Durable, StreamEvents, err)
		}
	}
	rescue := opts.consumer(ConsumerMaxDeliveries, "Dead-letters messages whose deliveries ran out", jetstream.DeliverAllPolicy)
	if _, err := js.CreateOrUpdateConsumer(ctx, StreamAdvisories, rescue); err != nil {
		return fmt.Errorf("ensure consumer %s on %s: %w", rescue.Durable, StreamAdvisories, err)
	}
	return nil
}

// ensureStream creates cfg's stream, or updates it when it holds another configuration.
// Every hub service ensures the topology as it starts, and nats-server (2.15) rewrites a
// stream's store configuration on any update, an unchanged one too, while another service
// may be creating its consumer on that stream: the race detector reports that race in the
// server. An unchanged stream is therefore left alone.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, cfg.Name)
	switch {
	case err == nil && sameStreamConfig(s.CachedInfo().Config, cfg):
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrStreamNotFound):
		return err
	}
	_, err = js.CreateOrUpdateStream(ctx, cfg)
	return err
}

// sameStreamConfig says whether a stream's configuration as the server reports it (cur) is
// want once the server has filled in its defaults: -1 for the limits left at 0, a
// duplicate window of 2 minutes (or MaxAge, when shorter), one replica, and metadata of its
// own (keys "_nats."). A difference it does not know of reads as a change, which costs
// only an update.
func sameStreamConfig(cur, want jetstream.StreamConfig) bool {
	unlimited := func(v *int64) {
		if *v == 0 {
			*v = -1
		}
	}
	unlimited(&want.MaxMsgs)
	unlimited(&want.MaxBytes)
	unlimited(&want.MaxMsgsPerSubject)
	if want.MaxConsumers == 0 {
		want.MaxConsumers = -1
	}
	if want.MaxMsgSize == 0 {
		want.MaxMsgSize = -1
	}
	if want.Duplicates == 0 {
		want.Duplicates = 2 * time.Minute
		if want.MaxAge > 0 && want.MaxAge < want.Duplicates {
			want.Duplicates = want.MaxAge
		}
	}
	if want.Replicas == 0 {
		want.Replicas = 1
	}
	userMetadata := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if !strings.HasPrefix(k, "_nats.") {
				out[k] = v
			}
		}
		return out
	}
	cur.Metadata, want.Metadata = userMetadata(cur.Metadata), userMetadata(want.Metadata)
	a, errA := json.Marshal(cur)
	b, errB := json.Marshal(want)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// EnsureApplyConsumer creates or updates the apply worker's consumer for a
// cluster on StreamWork and returns its name, for Consume.
func EnsureApplyConsumer(ctx context.Context, js jetstream.JetStream, cluster string, opts TopologyOptions) (string, error) {
	cfg, err := opts.ApplyConsumerConfig(cluster)
	if err != nil {
		return "", err
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, StreamWork, cfg); err != nil {
		return "", fmt.Errorf("ensure consumer %s on %s: %w", cfg.Durable, StreamWork, err)
	}
	return cfg.Durable, nil
}

// BucketHubSync is the key-value bucket in which hubsync records, per event subject, what it
// last published for an object of the hub cluster and what undoes it: a restart then publishes
// nothing again, and an object deleted on the hub while hubsync was down is still deleted.
// hubsync declares it; it holds one small record per object hubsync placed on the bus.
const BucketHubSync = "flotilla-hubsync"

// hubSyncMaxBytes bounds the bucket: a record is a few hundred bytes, so this holds
// hundreds of thousands of hub objects. When full, a new record is refused (hubsync retries),
// never an old one dropped.
const hubSyncMaxBytes = 256 << 20

// HubSyncBucket is BucketHubSync's configuration.
func (o TopologyOptions) HubSyncBucket() jetstream.KeyValueConfig {
	o = o.withDefaults()
	return jetstream.KeyValueConfig{
		Bucket:       BucketHubSync,
		Description:  "What hubsync published for each object of the hub cluster",
		History:      1,
		MaxValueSize: 64 << 10,
		MaxBytes:     hubSyncMaxBytes,
		Storage:      o.Storage,
		Replicas:     o.Replicas,
	}
}

// EnsureHubSyncBucket creates or updates BucketHubSync and returns it.
func EnsureHubSyncBucket(ctx context.Context, js jetstream.JetStream, opts TopologyOptions) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, opts.HubSyncBucket())
	if err != nil {
		return nil, fmt.Errorf("ensure key-value bucket %s: %w", BucketHubSync, err)
	}
	return kv, nil
}

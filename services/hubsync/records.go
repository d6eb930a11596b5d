package hubsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// records keeps what hubsync published, per event subject, in the bus's key-value bucket
// (bus.BucketHubSync). Only the leader writes it; it reads the whole bucket once when it
// becomes leader and keeps it in memory from then on.
type records struct {
	kv jetstream.KeyValue
	mu sync.Mutex
	m  map[string]Record // by event subject
}

// recordKey is a subject's key: subjects may hold characters keys may not.
func recordKey(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return hex.EncodeToString(sum[:20])
}

// load reads every record.
func loadRecords(ctx context.Context, kv jetstream.KeyValue) (*records, error) {
	r := &records{kv: kv, m: map[string]Record{}}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read hubsync records: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("read hubsync records: the watch ended")
			}
			if e == nil {
				return r, nil // every current value has been seen
			}
			var rec Record
			if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.Subject == "" {
				continue // not a record of this version: it is rewritten or left
			}
			r.m[rec.Subject] = rec
		}
	}
}

func (r *records) put(ctx context.Context, rec Record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("record %s: %w", rec.Subject, err)
	}
	if _, err := r.kv.Put(ctx, recordKey(rec.Subject), data); err != nil {
		return fmt.Errorf("record %s: %w", rec.Subject, err)
	}
	r.mu.Lock()
	r.m[rec.Subject] = rec
	r.mu.Unlock()
	return nil
}

func (r *records) remove(ctx context.Context, subject string) error {
	if err := r.kv.Purge(ctx, recordKey(subject)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget record %s: %w", subject, err)
	}
	r.mu.Lock()
	delete(r.m, subject)
	r.mu.Unlock()
	return nil
}

// all is a copy of every record, by subject.
func (r *records) all() map[string]Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.m)
}

// get is the record of subject.
func (r *records) get(subject string) (Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.m[subject]
	return rec, ok
}

// purgeMarkers removes the markers forgotten records leave in the bucket (one per key), so
// that the bucket holds the records of objects on the hub and no more.
func (r *records) purgeMarkers(ctx context.Context, log *slog.Logger) {
	if err := r.kv.PurgeDeletes(ctx); err != nil {
		log.Warn("purge the markers of forgotten hubsync records", "error", err)
	}
}

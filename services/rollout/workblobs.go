package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/rollout/override"
)

// Work whose manifests encode over events.InlineManifestsBytes, or hold a Secret value,
// travels by claim check:
// the manifests are a blob on the bus under the cluster's and placement's prefix (only
// that cluster's worker may read it) and the WorkDesired names it. work_blobs records
// each stored blob; one replaced by newer work or a tombstone is purged from the bus
// BlobGrace later, when no worker should still be reading it. A Secret's values so stay
// out of the outbox, which keeps the events it published: they are only on the bus, where
// the member's worker alone may read them.

// BlobGrace is how long a replaced work blob stays on the bus.
const BlobGrace = 10 * time.Minute

// attachManifests puts the cluster's manifests (the latest snapshot's, as its overrides
// made them) into work, inline or as a blob, and marks every other blob of the placement on
// the cluster as replaced. Manifests no override changed are encoded once for every cluster.
func (ps *pass) attachManifests(ctx context.Context, c *clusterRow, work *events.WorkDesired, rendered override.Result) error {
	manifests := rendered.Manifests
	encoded, secret, err := ps.encode(manifests, !rendered.Changed)
	if err != nil {
		return err
	}
	digest := ""
	if len(encoded) <= events.InlineManifestsBytes && !secret {
		work.Manifests = manifests
		if work.Manifests == nil {
			work.Manifests = []json.RawMessage{}
		}
	} else {
		prefix, err := bus.WorkBlobPrefix(c.cluster, ps.p.name)
		if err != nil {
			return bus.Permanent(err)
		}
		ref := bus.NewBlobRef(prefix, encoded)
		digest = ref.Digest
		// The row first: it waits for a purge of the same digest that is under way, so
		// the blob stored below is not purged after it.
		if _, err := ps.tx.Exec(ctx, `
			insert into work_blobs (cluster, placement, digest, size, chunks, stored_at)
			values ($1, $2, $3, $4, $5, $6)
			on conflict (cluster, placement, digest) do update set superseded_at = null`,
			c.cluster, ps.p.name, ref.Digest, ref.Size, ref.Chunks, ps.now); err != nil {
			return fmt.Errorf("record the work blob of %s on %s: %w", ps.p.name, c.cluster, err)
		}
		if ref, err = bus.PutBlob(ctx, ps.r.env.JS, bus.StreamWorkBlobs, prefix, encoded); err != nil {
			return fmt.Errorf("store the manifests of %s for %s: %w", ps.p.name, c.cluster, err)
		}
		work.ManifestsRef = &ref
	}
	return supersedeBlobs(ctx, ps.tx, c.cluster, ps.p.name, digest, ps.now)
}

// encode encodes manifests as one JSON array and says whether they hold a Secret value;
// shared manifests (the snapshot's own) are encoded once per pass.
func (ps *pass) encode(manifests []json.RawMessage, shared bool) ([]byte, bool, error) {
	if shared && ps.encoded != nil {
		return ps.encoded, ps.secret, nil
	}
	encoded, err := json.Marshal(manifests)
	if err != nil {
		return nil, false, fmt.Errorf("encode the manifests of %s: %w", ps.p.name, err)
	}
	secret := slices.ContainsFunc(manifests, func(m json.RawMessage) bool { return api.HoldsSecret(m) })
	if shared {
		ps.encoded, ps.secret = encoded, secret
	}
	return encoded, secret, nil
}

// supersedeBlobs marks the placement's blobs on the cluster, other than keep, as replaced.
func supersedeBlobs(ctx context.Context, tx pgx.Tx, cluster, placement, keep string, now time.Time) error {
	if _, err := tx.Exec(ctx, `
		update work_blobs set superseded_at = $4
		where cluster = $1 and placement = $2 and digest <> $3 and superseded_at is null`,
		cluster, placement, keep, now); err != nil {
		return fmt.Errorf("replace the work blobs of %s on %s: %w", placement, cluster, err)
	}
	return nil
}

// collectBlobs purges the blobs replaced more than BlobGrace ago, every minute until ctx
// ends. Replicas share the work: rows are claimed with SKIP LOCKED.
func (r *rollout) collectBlobs(ctx context.Context) error {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if n, err := r.purgeReplacedBlobs(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("purging replaced work blobs failed; retrying", "error", err)
		} else if n > 0 {
			r.log.Debug("purged replaced work blobs", "blobs", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// purgeReplacedBlobs purges up to 100 due blobs and returns how many.
func (r *rollout) purgeReplacedBlobs(ctx context.Context) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, r.env.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			select cluster, placement, digest, size, chunks from work_blobs
			where superseded_at < $1
			order by superseded_at limit 100
			for update skip locked`, r.now().Add(-BlobGrace))
		if err != nil {
			return err
		}
		type blob struct {
			cluster, placement string
			ref                bus.BlobRef
		}
		var due []blob
		for rows.Next() {
			var b blob
			if err := rows.Scan(&b.cluster, &b.placement, &b.ref.Digest, &b.ref.Size, &b.ref.Chunks); err != nil {
				return err
			}
			due = append(due, b)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, b := range due {
			if b.ref.Prefix, err = bus.WorkBlobPrefix(b.cluster, b.placement); err != nil {
				return err
			}
			if err := bus.PurgeBlob(ctx, r.env.JS, bus.StreamWorkBlobs, b.ref); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `delete from work_blobs where cluster = $1 and placement = $2 and digest = $3`,
				b.cluster, b.placement, b.ref.Digest); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

package rollout

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/platform/sealing"
)

// resealBatch bounds the rows one transaction of sealStored rewrites.
const resealBatch = 100

// sealStored brings what the rollout stored in line with its keys when it starts: Secrets in
// plain text (stored by a version that did not seal them) are sealed, and shells sealed with
// another key than the first are sealed again with it, so that a rotated-out key can leave
// the key file once every replica has started with the new one. Replicas starting together
// lock the rows they rewrite. Without keys it only warns about Secrets in plain text.
func (r *rollout) sealStored(ctx context.Context) error {
	if r.keys == nil {
		var n int
		err := r.env.Pool.QueryRow(ctx, `select count(*) from hub_resources
			where manifest::text like '%Secret%' and not manifest ? $1`, sealedField).Scan(&n)
		if err == nil && n > 0 {
			r.log.Warn("the hub store may hold Secrets in plain text; give the rollout --encryption-key-file to encrypt them", "objects", n)
		}
		return nil
	}
	hub, err := r.resealHub(ctx)
	if err != nil {
		return err
	}
	snaps, err := r.resealSnapshots(ctx)
	if err != nil {
		return err
	}
	if hub+snaps > 0 {
		r.log.Info("Secrets at rest sealed with the first key", "key", r.keys.Primary(), "hubObjects", hub, "snapshots", snaps)
	}
	return nil
}

// resealed is what to store instead of stored, and whether it differs.
func resealed(keys *sealing.Keys, stored json.RawMessage) (json.RawMessage, bool, error) {
	var obj map[string]any
	if json.Unmarshal(stored, &obj) == nil {
		if sealed, ok := obj[sealedField].(string); ok {
			if name, _ := sealing.SealedWith(sealed); name == keys.Primary() {
				return stored, false, nil
			}
		}
	}
	if !api.HoldsSecret(stored) && !hasSealedField(stored) {
		return stored, false, nil
	}
	plain, err := openManifest(keys, stored)
	if err != nil {
		return nil, false, err
	}
	out, err := sealManifest(keys, plain)
	return out, err == nil, err
}

func (r *rollout) resealHub(ctx context.Context) (int, error) {
	type row struct {
		id       [5]string
		manifest json.RawMessage
	}
	total, last := 0, [5]string{}
	for {
		done := true
		err := pgx.BeginFunc(ctx, r.env.Pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				select api_group, version, kind, namespace, name, manifest from hub_resources
				where (api_group, version, kind, namespace, name) > ($1, $2, $3, $4, $5)
				  and (manifest::text like '%Secret%' or manifest ? $6)
				order by api_group, version, kind, namespace, name limit $7
				for update`, last[0], last[1], last[2], last[3], last[4], sealedField, resealBatch)
			if err != nil {
				return err
			}
			batch, err := pgx.CollectRows(rows, func(rs pgx.CollectableRow) (row, error) {
				var x row
				err := rs.Scan(&x.id[0], &x.id[1], &x.id[2], &x.id[3], &x.id[4], &x.manifest)
				return x, err
			})
			if err != nil {
				return err
			}
			for _, x := range batch {
				out, changed, err := resealed(r.keys, x.manifest)
				if err != nil {
					return fmt.Errorf("%s %s/%s: %w", x.id[2], x.id[3], x.id[4], err)
				}
				if changed {
					if _, err := tx.Exec(ctx, `update hub_resources set manifest = $6
						where api_group = $1 and version = $2 and kind = $3 and namespace = $4 and name = $5`,
						x.id[0], x.id[1], x.id[2], x.id[3], x.id[4], out); err != nil {
						return err
					}
					total++
				}
				last = x.id
			}
			done = len(batch) < resealBatch
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("seal the hub store's Secrets: %w", err)
		}
		if done {
			return total, nil
		}
	}
}

func (r *rollout) resealSnapshots(ctx context.Context) (int, error) {
	type row struct {
		placement string
		index     int64
		manifests []json.RawMessage
	}
	total, lastPlacement, lastIndex := 0, "", int64(-1)
	for {
		done := true
		err := pgx.BeginFunc(ctx, r.env.Pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				select placement, snapshot_index::bigint, manifests from resource_snapshots
				where (placement, snapshot_index) > ($1, $2) and manifests is not null
				  and manifests::text like '%Secret%'
				order by placement, snapshot_index limit $3
				for update`, lastPlacement, lastIndex, resealBatch)
			if err != nil {
				return err
			}
			batch, err := pgx.CollectRows(rows, func(rs pgx.CollectableRow) (row, error) {
				var x row
				err := rs.Scan(&x.placement, &x.index, &x.manifests)
				return x, err
			})
			if err != nil {
				return err
			}
			for _, x := range batch {
				changed := false
				for i, m := range x.manifests {
					out, c, err := resealed(r.keys, m)
					if err != nil {
						return fmt.Errorf("snapshot %d of %s: %w", x.index, x.placement, err)
					}
					x.manifests[i], changed = out, changed || c
				}
				if changed {
					if _, err := tx.Exec(ctx, `update resource_snapshots set manifests = $3
						where placement = $1 and snapshot_index = $2`, x.placement, x.index, x.manifests); err != nil {
						return err
					}
					total++
				}
				lastPlacement, lastIndex = x.placement, x.index
			}
			done = len(batch) < resealBatch
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("seal the snapshots' Secrets: %w", err)
		}
		if done {
			return total, nil
		}
	}
}

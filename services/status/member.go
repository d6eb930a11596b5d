package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// foldMember applies one member event to the member's stored inputs.
// seq is the event's stream sequence; at stamps a join or leave and, for a heartbeat,
// is when the bus received it.
func (s *server) foldMember(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, name string, payload any, seq int64, at time.Time) error {
	var (
		m   fold.MemberInputs
		raw []byte
	)
	err := tx.QueryRow(ctx, `select inputs from status_members where name = $1 for update`, name).Scan(&raw)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("load member %s: %w", name, err)
	default:
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("load member %s: %w", name, err)
		}
	}
	if !m.Apply(payload, seq, at) {
		return nil
	}
	raw, err = json.Marshal(&m)
	if err != nil {
		return fmt.Errorf("encode member %s: %w", name, err)
	}
	var heartbeat *time.Time
	if m.Heartbeat != nil {
		heartbeat = &m.HeartbeatAt
	}
	// A new member has no row to lock: its first events (a join, then
	// heartbeats, which are ignored until the join) are serialised by the
	// insert's unique key instead.
	_, err = tx.Exec(ctx, `
		insert into status_members (name, inputs, joined, heartbeat_at, event_id, updated_at)
		values ($1, $2, $3, $4, $5, now())
		on conflict (name) do update set inputs = excluded.inputs, joined = excluded.joined,
			heartbeat_at = excluded.heartbeat_at, event_id = excluded.event_id, updated_at = now()`,
		name, raw, m.Joined, heartbeat, ev.ID())
	if err != nil {
		return fmt.Errorf("store member %s: %w", name, err)
	}
	return nil
}

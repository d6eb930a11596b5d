package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
)

// deadLetters is `fleetctl deadletters -o json --limit 0`: every message a consumer gave up on.
func (s *stack) deadLetters(ctx context.Context) ([]bus.DeadLetter, error) {
	out, errOut, err := s.fleetctl(ctx, "", "deadletters", "-o", "json", "--limit", "0")
	if err != nil {
		return nil, fmt.Errorf("fleetctl deadletters: %v %s", err, errOut)
	}
	var dls []bus.DeadLetter
	if err := json.Unmarshal([]byte(out), &dls); err != nil {
		return nil, fmt.Errorf("fleetctl deadletters -o json: %v\n%s", err, out)
	}
	return dls, nil
}

func describeDeadLetters(dls []bus.DeadLetter) string {
	var b strings.Builder
	for _, dl := range dls {
		fmt.Fprintf(&b, "\n  %d: consumer %s gave up on %s %s (%s seq %d) after %d deliveries: %s",
			dl.ID, dl.Consumer, dl.EventType, dl.EventID, dl.Stream, dl.Sequence, dl.Deliveries, dl.Reason)
	}
	return b.String()
}

// lastEventSeq is the last sequence on the EVENTS stream.
func (s *stack) lastEventSeq(ctx context.Context) (uint64, error) {
	st, err := s.js.Stream(ctx, bus.StreamEvents)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", bus.StreamEvents, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", bus.StreamEvents, err)
	}
	return info.State.LastSeq, nil
}

// eventIDs reads the ids (Nats-Msg-Id) of the events on EVENTS from sequence from to to, and
// how many of them are a second copy of an id already read (a publisher that sent an event
// again after the stream's duplicate window: consumers must take it once).
func (s *stack) eventIDs(ctx context.Context, from, to uint64) (ids []string, copies int, err error) {
	if to < from {
		return nil, 0, nil
	}
	cons, err := s.js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from, HeadersOnly: true,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", bus.StreamEvents, err)
	}
	seen := map[string]bool{}
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", bus.StreamEvents, err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			md, err := msg.Metadata()
			if err != nil {
				return nil, 0, err
			}
			if md.Sequence.Stream > to {
				return ids, copies, nil
			}
			id := msg.Headers().Get(jetstream.MsgIDHeader)
			switch {
			case id == "":
				ids = append(ids, fmt.Sprintf("(no id: %s seq %d)", msg.Subject(), md.Sequence.Stream))
			case seen[id]:
				copies++
			default:
				seen[id] = true
				ids = append(ids, id)
			}
			if md.Sequence.Stream == to {
				return ids, copies, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
			return nil, 0, fmt.Errorf("read %s: %w", bus.StreamEvents, err)
		}
		if n == 0 {
			// Messages that aged out or were never there (a sequence gap): nothing more to read.
			return ids, copies, nil
		}
	}
}

// unaudited are the ids among ids that the audit log does not hold.
func (s *stack) unaudited(ctx context.Context, ids []string) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		select u.event_id from unnest($1::text[]) as u(event_id)
		where not exists (select 1 from audit_log a where a.event_id = u.event_id)`, ids)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// duplicateEffects counts what was done twice that should be done once: audit log rows of one
// event id, and resource or policy snapshots cut twice of the same content for a placement
// (the suite never returns a placement to content it had).
func (s *stack) duplicateEffects(ctx context.Context) (map[string]int, error) {
	queries := map[string]string{
		"audit rows of one event":      `select count(*) - count(distinct event_id) from audit_log`,
		"resource snapshots cut twice": `select count(*) - count(distinct (placement, content_hash)) from resource_snapshots`,
		"policy snapshots cut twice":   `select count(*) - count(distinct (placement, content_hash)) from policy_snapshots`,
	}
	out := map[string]int{}
	for what, q := range queries {
		var n int
		if err := s.db.QueryRow(ctx, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if n > 0 {
			out[what] = n
		}
	}
	return out, nil
}

// raceReports are the processes whose logs hold a data race report or a panic.
func (s *stack) raceReports() []string {
	var out []string
	for _, d := range s.daemons() {
		data, err := os.ReadFile(d.logPath)
		if err != nil {
			continue
		}
		text := string(data)
		for _, mark := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
			if strings.Contains(text, mark) {
				out = append(out, fmt.Sprintf("%s: %q in %s", d.name, mark, d.logPath))
			}
		}
	}
	return out
}

package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of a redriven message.
const (
	// HeaderRedrivenSequence is the stream sequence of the message a redriven copy was made
	// from. Consume reports it as the copy's Meta.Sequence, so that consumers ordering
	// events by sequence take the copy for as old as the original. A value that is not
	// below the copy's own sequence is ignored: a publisher can only make its event older.
	HeaderRedrivenSequence = "Flotilla-Redriven-Sequence"
	// HeaderRedrivenFrom is the dead letter (its sequence in StreamDeadLetter) a copy was
	// redriven from.
	HeaderRedrivenFrom = "Flotilla-Redriven-From"
)

// ErrDeadLetterNotFound reports a dead-letter id that StreamDeadLetter does not hold.
var ErrDeadLetterNotFound = errors.New("dead letter not found")

// ErrNotRedrivable reports a dead letter that holds no copy of its message (its deliveries
// ran out after the message had left its stream), so there is nothing to send again.
var ErrNotRedrivable = errors.New("dead letter holds no copy of its message")

// DeadLetter is a message a consumer gave up on, as StreamDeadLetter keeps it.
type DeadLetter struct {
	// ID is its sequence in StreamDeadLetter.
	ID uint64 `json:"id"`
	// Consumer gave up on the message at Sequence of Stream, published on Subject, after
	// Deliveries deliveries, for Reason.
	Consumer   string `json:"consumer"`
	Stream     string `json:"stream"`
	Subject    string `json:"subject"`
	Sequence   uint64 `json:"sequence"`
	Deliveries uint64 `json:"deliveries"`
	Reason     string `json:"reason"`
	// EventID, EventType and EventSource are the CloudEvent's, when the message was one.
	EventID     string    `json:"eventId,omitempty"`
	EventType   string    `json:"eventType,omitempty"`
	EventSource string    `json:"eventSource,omitempty"`
	DeadAt      time.Time `json:"deadAt"`
	// Size is the message's payload in bytes.
	Size int `json:"size"`
	// Headers and Data are the message as it was published (without the dead-letter
	// headers); only GetDeadLetter fills them.
	Headers nats.Header `json:"-"`
	Data    []byte      `json:"-"`
}

// DeadLetterQuery selects dead letters.
type DeadLetterQuery struct {
	// Consumer keeps only that consumer's dead letters; empty: all.
	Consumer string
	// After skips dead letters up to and including this id, for paging.
	After uint64
	// Limit bounds how many are returned; 0: no bound.
	Limit int
}

// ListDeadLetters returns the dead letters q selects, oldest first, without their payloads,
// and how many more it selects beyond q.Limit.
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, q DeadLetterQuery) (_ []DeadLetter, more uint64, err error) {
	filter := SubjectsDeadLetter
	if q.Consumer != "" {
		filter = DeadLetterSubject(q.Consumer)
	}
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		MemoryStorage:     true,
		InactiveThreshold: time.Minute,
	}
	if q.After > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, q.After+1
	}
	cons, err := js.CreateConsumer(ctx, StreamDeadLetter, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	defer func() {
		_ = js.DeleteConsumer(context.WithoutCancel(ctx), StreamDeadLetter, cons.CachedInfo().Name)
	}()
	pending := cons.CachedInfo().NumPending
	var out []DeadLetter
	for pending > 0 && (q.Limit <= 0 || len(out) < q.Limit) {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return nil, 0, fmt.Errorf("list dead letters: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, 0, fmt.Errorf("list dead letters: %w", err)
		}
		pending = md.NumPending
		dl := parseDeadLetter(md.Sequence.Stream, msg.Headers(), nil, md.Timestamp)
		dl.Size, _ = strconv.Atoi(msg.Headers().Get(nats.MsgSize))
		out = append(out, dl)
	}
	return out, pending, nil
}

// GetDeadLetter returns dead letter id with the message it holds.
func GetDeadLetter(ctx context.Context, js jetstream.JetStream, id uint64) (*DeadLetter, error) {
	s, err := js.Stream(ctx, StreamDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("get dead letter %d: %w", id, err)
	}
	raw, err := s.GetMsg(ctx, id)
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && !strings.HasPrefix(raw.Subject, SubjectDeadLetterPrefix)) {
		return nil, fmt.Errorf("dead letter %d: %w", id, ErrDeadLetterNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get dead letter %d: %w", id, err)
	}
	dl := parseDeadLetter(id, raw.Header, raw.Data, raw.Time)
	return &dl, nil
}

// parseDeadLetter reads a dead letter's headers; data is its payload when fetched.
func parseDeadLetter(id uint64, h nats.Header, data []byte, at time.Time) DeadLetter {
	num := func(key string) uint64 {
		n, _ := strconv.ParseUint(h.Get(key), 10, 64)
		return n
	}
	dl := DeadLetter{
		ID:          id,
		Consumer:    h.Get(HeaderDeadLetterConsumer),
		Stream:      h.Get(HeaderDeadLetterStream),
		Subject:     h.Get(HeaderDeadLetterSubject),
		Sequence:    num(HeaderDeadLetterSequence),
		Deliveries:  num(HeaderDeadLetterDelivered),
		Reason:      h.Get(HeaderDeadLetterReason),
		EventID:     h.Get("ce-id"),
		EventType:   h.Get("ce-type"),
		EventSource: h.Get("ce-source"),
		DeadAt:      at,
		Size:        len(data),
		Data:        data,
		Headers:     nats.Header{},
	}
	for k, vs := range h {
		if strings.HasPrefix(strings.ToLower(k), "flotilla-dead-letter-") || strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		dl.Headers[k] = append([]string(nil), vs...)
	}
	return dl
}

// Redriven is what Redrive did with a dead letter.
type Redriven struct {
	DeadLetter
	// Outcome is "redriven" (the message was published again, at NewSequence) or
	// "superseded" (a newer message replaced it on a last-value subject: it was dropped).
	Outcome     string `json:"outcome"`
	NewSequence uint64 `json:"newSequence,omitempty"`
}

// Outcomes of Redrive.
const (
	OutcomeRedriven   = "redriven"
	OutcomeSuperseded = "superseded"
)

// Redrive publishes dead letter id's message again, unchanged (same event id and headers),
// on its subject, and removes the dead letter. Every consumer of the subject gets it again;
// their inboxes (keyed by event id) keep one that already handled the event from handling it
// twice, and the copy carries the original's sequence (HeaderRedrivenSequence), so that a
// newer event still wins. On StreamWork, whose subjects keep only the current desired state,
// the copy is published only while the message is still that state; a superseded one is
// dropped instead.
func Redrive(ctx context.Context, js jetstream.JetStream, id uint64) (*Redriven, error) {
	dl, err := GetDeadLetter(ctx, js, id)
	if err != nil {
		return nil, err
	}
	if dl.Subject == "" || (len(dl.Data) == 0 && dl.Headers.Get("ce-specversion") == "") {
		return nil, fmt.Errorf("redrive dead letter %d: %w", id, ErrNotRedrivable)
	}
	msg := nats.NewMsg(dl.Subject)
	for k, vs := range dl.Headers {
		msg.Header[k] = append([]string(nil), vs...)
	}
	origin := dl.Sequence
	if seq, ok := redrivenSequence(dl.Headers, dl.Sequence); ok {
		origin = seq // redriven before: keep the first original's
	}
	msg.Header.Set(HeaderRedrivenSequence, strconv.FormatUint(origin, 10))
	msg.Header.Set(HeaderRedrivenFrom, strconv.FormatUint(id, 10))
	msg.Data = dl.Data
	// The message id dedupes a retried redrive of this dead letter, not the event: the
	// event's own id may still be in the stream's duplicate window.
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(fmt.Sprintf("redrive-%d", id))}
	if dl.Stream == StreamWork {
		opts = append(opts, jetstream.WithExpectLastSequencePerSubject(dl.Sequence))
	}
	out := &Redriven{DeadLetter: *dl, Outcome: OutcomeRedriven}
	ack, err := js.PublishMsg(ctx, msg, opts...)
	switch {
	case err != nil && dl.Stream == StreamWork && isWrongLastSequence(err):
		out.Outcome = OutcomeSuperseded
	case err != nil:
		return nil, fmt.Errorf("redrive dead letter %d to %s: %w", id, dl.Subject, err)
	default:
		out.NewSequence = ack.Sequence
	}
	if err := deleteDeadLetter(ctx, js, id); err != nil {
		return out, fmt.Errorf("dead letter %d was %s but is still listed: %w", id, out.Outcome, err)
	}
	return out, nil
}

// redrivenSequence returns the original sequence a redriven message carries, if it is below
// actual.
func redrivenSequence(h nats.Header, actual uint64) (uint64, bool) {
	v := h.Get(HeaderRedrivenSequence)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 || n >= actual {
		return 0, false
	}
	return n, true
}

func deleteDeadLetter(ctx context.Context, js jetstream.JetStream, id uint64) error {
	s, err := js.Stream(ctx, StreamDeadLetter)
	if err != nil {
		return err
	}
	if err := s.DeleteMsg(ctx, id); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	return nil
}

// RedriveAll redrives, oldest first, every dead letter (of consumer, when not empty) that
// exists when it starts: one that fails again and comes back is left for next time. It goes
// on past failures, returns what it did, and reports the failures together.
func RedriveAll(ctx context.Context, js jetstream.JetStream, consumer string) ([]Redriven, error) {
	s, err := js.Stream(ctx, StreamDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("redrive dead letters: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("redrive dead letters: %w", err)
	}
	last := info.State.LastSeq
	var (
		done  []Redriven
		errs  []error
		after uint64
	)
	for {
		page, _, err := ListDeadLetters(ctx, js, DeadLetterQuery{Consumer: consumer, After: after, Limit: redrivePage})
		if err != nil {
			return done, errors.Join(append(errs, err)...)
		}
		if len(page) == 0 {
			return done, errors.Join(errs...)
		}
		for _, dl := range page {
			if dl.ID > last {
				return done, errors.Join(errs...)
			}
			r, err := Redrive(ctx, js, dl.ID)
			if r != nil {
				done = append(done, *r)
			}
			if err != nil {
				errs = append(errs, err)
			}
			after = dl.ID
		}
	}
}

// redrivePage is how many dead letters RedriveAll lists at a time.
const redrivePage = 100

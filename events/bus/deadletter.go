package bus

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers a dead-lettered message carries next to its original headers.
const (
	HeaderDeadLetterReason    = "Flotilla-Dead-Letter-Reason" // a sentence for humans
	HeaderDeadLetterStream    = "Flotilla-Dead-Letter-Stream"
	HeaderDeadLetterConsumer  = "Flotilla-Dead-Letter-Consumer"
	HeaderDeadLetterSubject   = "Flotilla-Dead-Letter-Subject"
	HeaderDeadLetterSequence  = "Flotilla-Dead-Letter-Sequence"
	HeaderDeadLetterDelivered = "Flotilla-Dead-Letter-Delivered"
)

// maxReason bounds the reason header; handler errors can be long.
const maxReason = 1024

// deadLetter copies the message to flotilla.deadletter.<consumer> and
// terminates the original. If the copy cannot be stored the message is
// redelivered later instead, so it is never dropped silently.
func (w *worker) deadLetter(ctx context.Context, msg jetstream.Msg, m Meta, reason string) {
	reason = oneLine(reason)
	if md, err := msg.Metadata(); err == nil {
		// The copy names where the message is now, also when it is a redriven copy
		// (whose Meta carries the original's sequence).
		m.Sequence = md.Sequence.Stream
	}
	dl, id := deadLetterMsg(msg.Headers(), msg.Data(), m, reason)
	// Still record it when shutting down.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := w.js.PublishMsg(pctx, dl, jetstream.WithMsgID(id)); err != nil {
		delay := w.retryDelay(m.NumDelivered)
		w.log.Error("cannot dead-letter message, will retry",
			"subject", m.Subject, "sequence", m.Sequence, "delivered", m.NumDelivered,
			"reason", reason, "retry_in", delay, "err", err)
		_ = msg.NakWithDelay(delay)
		return
	}
	w.settled(msg, m.Consumer, DeadLettered)
	w.log.Error("message dead-lettered",
		"subject", m.Subject, "sequence", m.Sequence, "delivered", m.NumDelivered,
		"dead_letter_subject", dl.Subject, "reason", reason)
	if err := msg.TermWithReason(reason); err != nil {
		// It will come back and be dead-lettered again; the message id keeps
		// that to one copy within the duplicate window.
		w.log.Warn("terminate after dead-letter failed", "subject", m.Subject, "sequence", m.Sequence, "err", err)
	}
}

// deadLetterMsg builds the dead-letter copy of a message and its Nats-Msg-Id.
func deadLetterMsg(headers nats.Header, data []byte, m Meta, reason string) (*nats.Msg, string) {
	dl := nats.NewMsg(DeadLetterSubject(m.Consumer))
	for k, vs := range headers {
		// Nats-* headers steer the server (Nats-Msg-Id, Nats-Expected-*,
		// Nats-Rollup, ...) and would misapply to the copy.
		if strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		dl.Header[k] = append([]string(nil), vs...)
	}
	dl.Header.Set(HeaderDeadLetterReason, reason)
	dl.Header.Set(HeaderDeadLetterStream, m.Stream)
	dl.Header.Set(HeaderDeadLetterConsumer, m.Consumer)
	dl.Header.Set(HeaderDeadLetterSubject, m.Subject)
	dl.Header.Set(HeaderDeadLetterSequence, strconv.FormatUint(m.Sequence, 10))
	dl.Header.Set(HeaderDeadLetterDelivered, strconv.FormatUint(m.NumDelivered, 10))
	dl.Data = data
	// The id names the consumer too: two consumers of one stream may both
	// give up on the same message, and the dead-letter stream deduplicates
	// ids across all its subjects.
	return dl, fmt.Sprintf("%s-%d-%s", m.Stream, m.Sequence, m.Consumer)
}

// oneLine makes s safe for a header value and bounded.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxReason {
		n := maxReason - 3
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "..."
	}
	return s
}

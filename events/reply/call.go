package reply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/flotilla-dev/flotilla/events"
)

// headerRoom is what a piece leaves of the server's max_payload for its headers.
const headerRoom = 4 << 10

// ErrNoAnswer: nothing answered within the wait for the first piece.
var ErrNoAnswer = errors.New("no answer in time")

// PieceBytes is the data a reply message may carry on nc: the contract's
// bound, less where the server's max_payload is smaller.
func PieceBytes(nc *nats.Conn) int {
	n := events.QueryReplyPieceBytes
	if limit := int(nc.MaxPayload()) - headerRoom; limit < n {
		n = max(limit, 1<<10)
	}
	return n
}

// Answer sends a reply on subject to: the QueryReply JSON that write produces,
// in bounded pieces, or, when write fails, an error answer (micro's error
// headers and a QueryReply with Error) after whatever pieces went out.
func Answer(nc *nats.Conn, to string, write func(io.Writer) error) error {
	w := NewWriter(PieceBytes(nc), func(p Piece) error {
		return nc.PublishMsg(&nats.Msg{Subject: to, Header: p.Header, Data: p.Data})
	})
	err := write(w)
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		return nil
	}
	return AnswerError(nc, to, "500", err)
}

// AnswerError sends an error answer with code on subject to.
func AnswerError(nc *nats.Conn, to, code string, cause error) error {
	data, _ := json.Marshal(events.QueryReply[any]{Error: cause.Error()})
	h := nats.Header{}
	h.Set(micro.ErrorHeader, cause.Error())
	h.Set(micro.ErrorCodeHeader, code)
	if err := nc.PublishMsg(&nats.Msg{Subject: to, Header: h, Data: data}); err != nil {
		return fmt.Errorf("answer %s: %w (answering: %v)", to, err, cause)
	}
	return cause
}

// Call publishes data on subject with replyTo as its reply subject (a fresh
// inbox of nc when empty), waits for the answer's pieces, each within
// perPiece, and decodes the QueryReply's Result.
func Call[T any](ctx context.Context, nc *nats.Conn, subject, replyTo string, data []byte, perPiece time.Duration) (T, error) {
	var zero T
	answer, err := collect(ctx, nc, subject, replyTo, data, perPiece)
	if err != nil {
		return zero, err
	}
	var r events.QueryReply[T]
	decodeErr := json.Unmarshal(answer.Data, &r)
	if r.Error == "" && decodeErr != nil {
		r.Error = answer.Header.Get(micro.ErrorHeader)
	}
	if r.Error != "" {
		return zero, fmt.Errorf("%s answered: %s", subject, r.Error)
	}
	if decodeErr != nil {
		return zero, fmt.Errorf("read the answer on %s: %w", subject, decodeErr)
	}
	return r.Result, nil
}

func collect(ctx context.Context, nc *nats.Conn, subject, replyTo string, data []byte, perPiece time.Duration) (*Piece, error) {
	if replyTo == "" {
		replyTo = nc.NewInbox()
	}
	sub, err := nc.SubscribeSync(replyTo)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", replyTo, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, 2*events.QueryReplyMaxBytes); err != nil {
		return nil, err
	}
	if err := nc.PublishRequest(subject, replyTo, data); err != nil {
		return nil, fmt.Errorf("ask on %s: %w", subject, err)
	}
	asm := NewAssembler(0)
	for {
		wait, cancel := context.WithTimeout(ctx, perPiece)
		msg, err := sub.NextMsgWithContext(wait)
		cancel()
		pieces, size := asm.Received()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return nil, fmt.Errorf("%w: nothing answers on %s", ErrNoAnswer, subject)
		case errors.Is(err, context.DeadlineExceeded) && pieces == 0:
			return nil, fmt.Errorf("%w: %s did not answer within %s", ErrNoAnswer, subject, perPiece)
		case errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("%w: %s stopped answering after %d pieces (%d bytes)", ErrNoAnswer, subject, pieces, size)
		case err != nil:
			return nil, fmt.Errorf("answer on %s: %w", subject, err)
		}
		answer, err := asm.Add(Piece{Header: msg.Header, Data: msg.Data})
		if err != nil {
			return nil, fmt.Errorf("answer on %s: %w", subject, err)
		}
		if answer != nil {
			return answer, nil
		}
	}
}

// Serve answers the requests on subject (in queue group queue, when not empty)
// until ctx ends, one at a time: handle writes the answer's QueryReply JSON, or
// fails, which is answered as an error. A request without a reply subject is
// dropped, and so is one accept (when not nil) refuses. log says what could not be
// answered.
func Serve(ctx context.Context, nc *nats.Conn, subject, queue string, log *slog.Logger, accept func(*nats.Msg) error, handle func(ctx context.Context, m *nats.Msg, w io.Writer) error) error {
	msgs := make(chan *nats.Msg, 64)
	sub, err := nc.ChanQueueSubscribe(subject, queue, msgs)
	if err != nil {
		return fmt.Errorf("serve %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			if m.Reply == "" {
				continue
			}
			if accept != nil {
				if err := accept(m); err != nil {
					log.Warn("request refused", "subject", m.Subject, "reply", m.Reply, "err", err)
					continue
				}
			}
			if err := Answer(nc, m.Reply, func(w io.Writer) error { return handle(ctx, m, w) }); err != nil {
				log.Warn("request answered with an error", "subject", m.Subject, "err", err)
			}
		}
	}
}

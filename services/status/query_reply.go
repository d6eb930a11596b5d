package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/reply"
)

// headerRoom is what a piece leaves of the server's max_payload for its
// headers (well under it: a piece number, a length and a digest).
const headerRoom = 4 << 10

// whole adapts a query whose answer is one value: serialised once, then
// split into pieces.
func whole[Q, R any](ctx context.Context, s *server, nc *nats.Conn, fn func(*server, context.Context, Q) (R, error)) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		answer(ctx, s, nc, req, func(ctx context.Context, q Q, w io.Writer) error {
			result, err := fn(s, ctx, q)
			if err != nil {
				return err
			}
			data, err := json.Marshal(events.QueryReply[R]{Result: result})
			if err != nil {
				return fmt.Errorf("encode the reply: %w", err)
			}
			_, err = w.Write(data)
			return err
		})
	})
}

// list adapts a query whose answer is a list that grows with the fleet: fn
// emits the items one by one as it pages through the database, and each is
// written to the reply as it comes, so that the service holds a page and a
// piece, not the fleet.
func list[Q, T any](ctx context.Context, s *server, nc *nats.Conn, fn func(*server, context.Context, Q, func(T) error) error) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		answer(ctx, s, nc, req, func(ctx context.Context, q Q, w io.Writer) error {
			if _, err := io.WriteString(w, `{"result":[`); err != nil {
				return err
			}
			first := true
			err := fn(s, ctx, q, func(item T) error {
				data, err := json.Marshal(item)
				if err != nil {
					return fmt.Errorf("encode the reply: %w", err)
				}
				if !first {
					if _, err := w.Write([]byte{','}); err != nil {
						return err
					}
				}
				first = false
				_, err = w.Write(data)
				return err
			})
			if err != nil {
				return err
			}
			_, err = io.WriteString(w, `]}`)
			return err
		})
	})
}

// answer decodes a query (an empty body is the zero query), runs it and
// streams the reply's JSON, as write produces it, to the request's reply
// subject in bounded pieces (events/query.go). Each piece is published on
// the connection rather than with micro's Respond: a reply is many messages.
// An error, whether before the first piece or after some, is answered with
// req.Error, which micro counts in the endpoint's stats.
func answer[Q any](ctx context.Context, s *server, nc *nats.Conn, req micro.Request, write func(context.Context, Q, io.Writer) error) {
	var q Q
	if data := req.Data(); len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &q); err != nil {
			s.fail(req, badRequest{fmt.Errorf("the query is not valid JSON for %T: %v", q, err)}, 0)
			return
		}
	}
	if req.Reply() == "" {
		s.log.Debug("a query without a reply subject: nothing to answer", "subject", req.Subject())
		return
	}
	w := reply.NewWriter(pieceBytes(nc), func(p reply.Piece) error {
		return nc.PublishMsg(&nats.Msg{Subject: req.Reply(), Header: p.Header, Data: p.Data})
	})
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	err := write(qctx, q, w)
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		s.fail(req, err, w.Sent())
	}
}

// fail answers err, after sent pieces of the reply: the error and its code
// in micro's headers and a QueryReply with Error as data.
func (s *server) fail(req micro.Request, err error, sent int) {
	r := events.QueryReply[any]{Error: err.Error()}
	code := codeInternal
	var bad badRequest
	switch {
	case errors.Is(err, errNotFound):
		code, r.NotFound = codeNotFound, true
	case errors.As(err, &bad):
		code = codeBadRequest
	case errors.Is(err, reply.ErrTooLarge):
		code = codeTooLarge
		r.Error += "; ask for less (a label selector, a lower limit)"
	default:
		s.log.Error("query failed", "subject", req.Subject(), "pieces", sent, "err", err)
	}
	data, _ := json.Marshal(r)
	if rerr := req.Error(code, r.Error, data); rerr != nil {
		s.log.Warn("query reply failed", "subject", req.Subject(), "err", rerr)
	}
}

// pieceBytes is the data a reply message may carry on nc: the contract's
// bound, less where the server's max_payload is smaller.
func pieceBytes(nc *nats.Conn) int {
	n := events.QueryReplyPieceBytes
	if limit := int(nc.MaxPayload()) - headerRoom; limit < n {
		n = max(limit, 1<<10)
	}
	return n
}

// keyed is a row's key with the item read from it.
type keyed[T any] struct {
	key  string
	item T
}

// keyset pages through query in key order: query takes the last key of the
// previous page ($1, "" for the first), the page size ($2) and args ($3, ...)
// and returns rows whose first column is the key, ordered by it. Each item
// goes to emit; a page shorter than size is the last.
func keyset[T any](ctx context.Context, tx pgx.Tx, query string, size int, scan pgx.RowToFunc[keyed[T]], emit func(T) error, args ...any) error {
	after := ""
	for {
		rows, err := tx.Query(ctx, query, append([]any{after, size}, args...)...)
		if err != nil {
			return err
		}
		page, err := pgx.CollectRows(rows, scan)
		if err != nil {
			return err
		}
		for _, row := range page {
			if err := emit(row.item); err != nil {
				return err
			}
		}
		if len(page) < size {
			return nil
		}
		after = page[len(page)-1].key
	}
}

// snapshot runs read in a read-only repeatable-read transaction: every page
// of a list sees the same state of the database.
func (s *server) snapshot(ctx context.Context, read func(pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := read(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

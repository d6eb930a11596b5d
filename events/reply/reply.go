// Package reply splits a query reply (events/query.go) into bounded pieces and
// puts it back together. The service writes a reply's JSON to a Writer, which
// sends a piece each time one fills; the client feeds the messages it
// receives to an Assembler, which gives back the whole reply only when every
// piece arrived, once and in order, and the length and digest match.
package reply

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/flotilla-dev/flotilla/events"
)

var (
	// ErrTooLarge: the reply is over its cap (events.QueryReplyMaxBytes).
	ErrTooLarge = errors.New("the reply is over the cap on a query reply")
	// ErrCorrupt: pieces are missing, repeated, out of order or do not match
	// the reply's length and digest.
	ErrCorrupt = errors.New("the reply is incomplete or corrupt")
)

// Piece is one message of a reply.
type Piece struct {
	Header nats.Header
	Data   []byte
}

// digestPrefix starts the value of events.QueryReplyDigestHeader.
const digestPrefix = "sha256="

// Writer is the service's end: an io.Writer for one reply's JSON that sends it
// in pieces of at most its size, the last one on Close.
type Writer struct {
	send  func(Piece) error
	size  int
	max   int64
	buf   []byte
	sent  int
	total int64
	sum   hash.Hash
	err   error
}

// NewWriter returns a Writer sending pieces of at most size bytes
// (events.QueryReplyPieceBytes when size is not in (0, that]) with send.
func NewWriter(size int, send func(Piece) error) *Writer {
	if size <= 0 || size > events.QueryReplyPieceBytes {
		size = events.QueryReplyPieceBytes
	}
	return &Writer{send: send, size: size, max: events.QueryReplyMaxBytes, buf: make([]byte, 0, size), sum: sha256.New()}
}

// Write buffers p and sends every piece that fills. Past the cap it sends
// nothing more and returns ErrTooLarge.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.total+int64(len(p)) > w.max {
		w.err = fmt.Errorf("%w: more than %d bytes (%d MiB)", ErrTooLarge, w.max, w.max>>20)
		return 0, w.err
	}
	w.total += int64(len(p))
	w.sum.Write(p)
	n := len(p)
	for len(p) > 0 {
		if len(w.buf) == w.size {
			if err := w.flush(nil); err != nil {
				return n - len(p), err
			}
		}
		k := min(len(p), w.size-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
	}
	return n, nil
}

// Close sends the last piece: what is buffered, with the length and digest
// of the whole reply.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	last := nats.Header{}
	last.Set(events.QueryReplyBytesHeader, strconv.FormatInt(w.total, 10))
	last.Set(events.QueryReplyDigestHeader, digestPrefix+hex.EncodeToString(w.sum.Sum(nil)))
	if err := w.flush(last); err != nil {
		return err
	}
	w.err = errors.New("the reply is already complete")
	return nil
}

// Sent is the number of pieces sent: while it is 0, an error can still be the
// whole answer.
func (w *Writer) Sent() int { return w.sent }

func (w *Writer) flush(h nats.Header) error {
	if h == nil {
		h = nats.Header{}
	}
	h.Set(events.QueryReplyPieceHeader, strconv.Itoa(w.sent))
	// The piece keeps its own bytes: send may hold on to them.
	data := bytes.Clone(w.buf)
	if data == nil {
		data = []byte{}
	}
	if err := w.send(Piece{Header: h, Data: data}); err != nil {
		w.err = fmt.Errorf("send piece %d of the reply: %w", w.sent, err)
		return w.err
	}
	w.sent++
	w.buf = w.buf[:0]
	return nil
}

// Assembler is the client's end: it takes a reply's messages in the order
// they arrive and puts the reply together.
type Assembler struct {
	max  int64
	next int
	buf  bytes.Buffer
	sum  hash.Hash
	done bool
}

// NewAssembler returns an Assembler refusing replies over max bytes
// (events.QueryReplyMaxBytes when max <= 0).
func NewAssembler(max int64) *Assembler {
	if max <= 0 {
		max = events.QueryReplyMaxBytes
	}
	return &Assembler{max: max, sum: sha256.New()}
}

// Received is how many pieces and bytes have arrived.
func (a *Assembler) Received() (pieces int, size int64) {
	return a.next, int64(a.buf.Len())
}

// Add takes the next message. It returns the answer once complete: the whole
// reply (with the last piece's headers), an error reply of the service (a
// message with micro's error headers, which ends a reply at any point), or a
// first message that is not a piece (a service from before pieces). Until
// then it returns nil.
func (a *Assembler) Add(p Piece) (*Piece, error) {
	if a.done {
		return nil, fmt.Errorf("%w: a message after the last piece", ErrCorrupt)
	}
	if p.Header.Get(micro.ErrorCodeHeader) != "" || p.Header.Get(micro.ErrorHeader) != "" {
		a.done = true
		return &p, nil
	}
	index := p.Header.Get(events.QueryReplyPieceHeader)
	if index == "" {
		if a.next > 0 {
			return nil, fmt.Errorf("%w: a message without a piece number after piece %d", ErrCorrupt, a.next-1)
		}
		a.done = true
		return &p, nil
	}
	i, err := strconv.Atoi(index)
	switch {
	case err != nil || i < 0 || strconv.Itoa(i) != index:
		return nil, fmt.Errorf("%w: piece number %q is not a number", ErrCorrupt, index)
	case i < a.next:
		return nil, fmt.Errorf("%w: piece %d arrived twice", ErrCorrupt, i)
	case i > a.next:
		return nil, fmt.Errorf("%w: piece %d is missing (piece %d arrived in its place)", ErrCorrupt, a.next, i)
	case len(p.Data) > events.QueryReplyPieceBytes:
		return nil, fmt.Errorf("%w: piece %d has %d bytes, over the bound of %d bytes a piece", ErrCorrupt, i, len(p.Data), events.QueryReplyPieceBytes)
	case int64(a.buf.Len())+int64(len(p.Data)) > a.max:
		return nil, fmt.Errorf("%w: more than %d bytes (%d MiB) at piece %d", ErrTooLarge, a.max, a.max>>20, i)
	}
	a.next++
	a.buf.Write(p.Data)
	a.sum.Write(p.Data)

	size, digest := p.Header.Get(events.QueryReplyBytesHeader), p.Header.Get(events.QueryReplyDigestHeader)
	if size == "" && digest == "" {
		return nil, nil
	}
	a.done = true
	if size == "" || digest == "" {
		return nil, fmt.Errorf("%w: the last piece (%d) needs both %s and %s", ErrCorrupt, i, events.QueryReplyBytesHeader, events.QueryReplyDigestHeader)
	}
	if n, err := strconv.ParseInt(size, 10, 64); err != nil || n != int64(a.buf.Len()) {
		return nil, fmt.Errorf("%w: %d bytes arrived in %d pieces, the reply has %s", ErrCorrupt, a.buf.Len(), a.next, size)
	}
	if want := digestPrefix + hex.EncodeToString(a.sum.Sum(nil)); digest != want {
		return nil, fmt.Errorf("%w: the digest of the %d bytes that arrived is %s, the reply's is %s", ErrCorrupt, a.buf.Len(), want, digest)
	}
	return &Piece{Header: p.Header, Data: a.buf.Bytes()}, nil
}

// Reassemble puts a reply together from its messages, in the order they
// arrived: Add for each, failing when messages follow the answer or the
// messages end before it.
func Reassemble(max int64, msgs []Piece) (*Piece, error) {
	a := NewAssembler(max)
	for i, m := range msgs {
		answer, err := a.Add(m)
		if err != nil {
			return nil, err
		}
		if answer != nil {
			if rest := len(msgs) - i - 1; rest > 0 {
				return nil, fmt.Errorf("%w: %d messages after the last piece", ErrCorrupt, rest)
			}
			return answer, nil
		}
	}
	pieces, n := a.Received()
	return nil, fmt.Errorf("%w: the messages ended after %d pieces (%d bytes), without the last", ErrCorrupt, pieces, n)
}

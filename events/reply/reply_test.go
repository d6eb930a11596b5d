package reply

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/flotilla-dev/flotilla/events"
)

// split writes data to a Writer of size-byte pieces in writes of step bytes
// and returns the pieces it sent.
func split(t testing.TB, data []byte, size, step int) []Piece {
	t.Helper()
	var pieces []Piece
	w := NewWriter(size, func(p Piece) error { pieces = append(pieces, p); return nil })
	for rest := data; len(rest) > 0; {
		k := min(step, len(rest))
		if n, err := w.Write(rest[:k]); err != nil || n != k {
			t.Fatalf("Write = %d, %v", n, err)
		}
		rest = rest[k:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Sent() != len(pieces) {
		t.Errorf("Sent = %d, %d pieces sent", w.Sent(), len(pieces))
	}
	return pieces
}

func document(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"result":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"member-%05d"}`, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	const size = 16
	for _, n := range []int{0, 1, size - 1, size, size + 1, 3*size + 7, 10 * size} {
		for _, step := range []int{1, 5, size, 1000} {
			t.Run(fmt.Sprintf("%d bytes in writes of %d", n, step), func(t *testing.T) {
				data := bytes.Repeat([]byte("x"), n)
				pieces := split(t, data, size, step)
				if want := max(1, (n+size-1)/size); len(pieces) != want {
					t.Errorf("%d pieces, want %d", len(pieces), want)
				}
				for i, p := range pieces {
					if len(p.Data) > size {
						t.Errorf("piece %d has %d bytes, over %d", i, len(p.Data), size)
					}
					if got := p.Header.Get(events.QueryReplyPieceHeader); got != fmt.Sprint(i) {
						t.Errorf("piece %d is numbered %q", i, got)
					}
					last := p.Header.Get(events.QueryReplyDigestHeader) != ""
					if last != (i == len(pieces)-1) {
						t.Errorf("piece %d of %d has a digest: %v", i, len(pieces), last)
					}
				}
				got, err := Reassemble(0, pieces)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Data, data) {
					t.Errorf("reassembled %q, want %q", got.Data, data)
				}
			})
		}
	}
}

func TestWriterDefaultsToTheBound(t *testing.T) {
	data := document(30000) // about 700 KB
	pieces := split(t, data, 0, 4096)
	if len(pieces) != 3 || len(pieces[0].Data) != events.QueryReplyPieceBytes {
		t.Errorf("%d pieces, the first of %d bytes; want 3 of at most %d", len(pieces), len(pieces[0].Data), events.QueryReplyPieceBytes)
	}
	if got, err := Reassemble(0, pieces); err != nil || !bytes.Equal(got.Data, data) {
		t.Errorf("Reassemble: %v", err)
	}
}

func TestWriterStopsAtTheCap(t *testing.T) {
	var sent int
	w := NewWriter(10, func(Piece) error { sent++; return nil })
	w.max = 25
	if _, err := w.Write(make([]byte, 25)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Write([]byte("x"))
	if !errors.Is(err, ErrTooLarge) || err.Error() != "the reply is over the cap on a query reply: more than 25 bytes (0 MiB)" {
		t.Errorf("Write past the cap: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Close after the cap: %v", err)
	}
	if sent != 2 || w.Sent() != 2 {
		t.Errorf("%d pieces sent (Sent %d), want the 2 full ones only", sent, w.Sent())
	}
}

func TestWriterReportsASendError(t *testing.T) {
	w := NewWriter(4, func(p Piece) error { return errors.New("connection closed") })
	_, err := w.Write([]byte("0123456789"))
	if err == nil || err.Error() != "send piece 0 of the reply: connection closed" {
		t.Errorf("Write = %v", err)
	}
}

// edit returns a copy of pieces changed by change.
func edit(pieces []Piece, change func([]Piece) []Piece) []Piece {
	out := make([]Piece, len(pieces))
	for i, p := range pieces {
		out[i] = Piece{Header: nats.Header{}, Data: bytes.Clone(p.Data)}
		for k, v := range p.Header {
			out[i].Header[k] = append([]string(nil), v...)
		}
	}
	return change(out)
}

func TestReassembleRefuses(t *testing.T) {
	doc := document(40)
	pieces := split(t, doc, 64, 64)
	if len(pieces) != 16 {
		t.Fatalf("%d pieces, want 16", len(pieces))
	}
	last := len(pieces) - 1
	for _, tc := range []struct {
		name   string
		change func([]Piece) []Piece
		want   string
		is     error
	}{
		{"a piece missing", func(p []Piece) []Piece { return append(p[:2], p[3:]...) },
			"the reply is incomplete or corrupt: piece 2 is missing (piece 3 arrived in its place)", ErrCorrupt},
		{"a piece twice", func(p []Piece) []Piece { return append(p[:3], p[2:]...) },
			"the reply is incomplete or corrupt: piece 2 arrived twice", ErrCorrupt},
		{"out of order", func(p []Piece) []Piece { p[1], p[2] = p[2], p[1]; return p },
			"the reply is incomplete or corrupt: piece 1 is missing (piece 2 arrived in its place)", ErrCorrupt},
		{"no last piece", func(p []Piece) []Piece { return p[:last] },
			fmt.Sprintf("the reply is incomplete or corrupt: the messages ended after %d pieces (%d bytes), without the last", last, 64*last), ErrCorrupt},
		{"the last piece twice", func(p []Piece) []Piece { return append(p, p[last]) },
			"the reply is incomplete or corrupt: 1 messages after the last piece", ErrCorrupt},
		{"a byte changed", func(p []Piece) []Piece { p[1].Data[7] ^= 1; return p },
			"the reply is incomplete or corrupt: the digest of the", ErrCorrupt},
		{"a piece cut short", func(p []Piece) []Piece { p[1].Data = p[1].Data[:10]; return p },
			fmt.Sprintf("the reply is incomplete or corrupt: %d bytes arrived in 16 pieces, the reply has %d", len(doc)-54, len(doc)), ErrCorrupt},
		{"a last piece without its length", func(p []Piece) []Piece { p[last].Header.Del(events.QueryReplyBytesHeader); return p },
			"the reply is incomplete or corrupt: the last piece (15) needs both Flotilla-Reply-Bytes and Flotilla-Reply-Digest", ErrCorrupt},
		{"a piece number that is not one", func(p []Piece) []Piece { p[1].Header.Set(events.QueryReplyPieceHeader, "01"); return p },
			`the reply is incomplete or corrupt: piece number "01" is not a number`, ErrCorrupt},
		{"a negative piece number", func(p []Piece) []Piece { p[0].Header.Set(events.QueryReplyPieceHeader, "-1"); return p },
			`the reply is incomplete or corrupt: piece number "-1" is not a number`, ErrCorrupt},
		{"a message without a piece number in the middle", func(p []Piece) []Piece { p[1].Header.Del(events.QueryReplyPieceHeader); return p },
			"the reply is incomplete or corrupt: a message without a piece number after piece 0", ErrCorrupt},
		{"a piece over the bound", func(p []Piece) []Piece {
			p[1].Data = make([]byte, events.QueryReplyPieceBytes+1)
			return p
		}, fmt.Sprintf("the reply is incomplete or corrupt: piece 1 has %d bytes, over the bound of %d bytes a piece", events.QueryReplyPieceBytes+1, events.QueryReplyPieceBytes), ErrCorrupt},
		{"nothing", func([]Piece) []Piece { return nil },
			"the reply is incomplete or corrupt: the messages ended after 0 pieces (0 bytes), without the last", ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Reassemble(0, edit(pieces, tc.change))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, tc.is) {
				t.Errorf("Reassemble = %v, %v\nwant the error %q", got, err, tc.want)
			}
		})
	}
}

func TestAssemblerCap(t *testing.T) {
	pieces := split(t, document(40), 64, 64)
	_, err := Reassemble(200, pieces)
	if !errors.Is(err, ErrTooLarge) || err.Error() != "the reply is over the cap on a query reply: more than 200 bytes (0 MiB) at piece 3" {
		t.Errorf("Reassemble = %v", err)
	}
}

func TestAnswersThatAreNotPieces(t *testing.T) {
	pieces := split(t, document(40), 64, 64)
	failed := Piece{Header: nats.Header{micro.ErrorCodeHeader: {"500"}, micro.ErrorHeader: {"database unavailable"}}, Data: []byte(`{"error":"database unavailable"}`)}
	t.Run("an error after pieces ends the reply", func(t *testing.T) {
		got, err := Reassemble(0, append(pieces[:3:3], failed))
		if err != nil || got.Header.Get(micro.ErrorCodeHeader) != "500" || string(got.Data) != string(failed.Data) {
			t.Errorf("Reassemble = %+v, %v; want the error reply", got, err)
		}
	})
	t.Run("an error as the whole answer", func(t *testing.T) {
		got, err := Reassemble(0, []Piece{failed})
		if err != nil || got.Header.Get(micro.ErrorHeader) != "database unavailable" {
			t.Errorf("Reassemble = %+v, %v", got, err)
		}
	})
	t.Run("a reply from before pieces", func(t *testing.T) {
		got, err := Reassemble(0, []Piece{{Data: []byte(`{"result":{}}`)}})
		if err != nil || string(got.Data) != `{"result":{}}` {
			t.Errorf("Reassemble = %+v, %v", got, err)
		}
	})
}

// FuzzReassemble splits data into pieces, changes them as op says, and holds
// Reassemble to its promise: the reply as written, or an error; never other
// bytes, never a panic.
func FuzzReassemble(f *testing.F) {
	f.Add([]byte(`{"result":[{"name":"member-1"},{"name":"member-2"}]}`), uint8(7), uint8(0), uint8(0), uint8(0))
	f.Add(document(20), uint8(16), uint8(1), uint8(2), uint8(0))
	f.Add(document(20), uint8(16), uint8(2), uint8(3), uint8(0))
	f.Add(document(20), uint8(16), uint8(3), uint8(1), uint8(0))
	f.Add(document(20), uint8(16), uint8(4), uint8(5), uint8(0x20))
	f.Add([]byte{}, uint8(1), uint8(5), uint8(0), uint8(0))
	f.Add(document(3), uint8(9), uint8(6), uint8(1), uint8('7'))
	f.Fuzz(func(t *testing.T, data []byte, size, op, at, b uint8) {
		pieces := split(t, data, int(size)+1, 3)
		i := int(at) % len(pieces)
		changed := edit(pieces, func(p []Piece) []Piece {
			switch op % 8 {
			case 1: // drop a piece
				return append(p[:i], p[i+1:]...)
			case 2: // repeat one
				return append(p[:i+1], p[i:]...)
			case 3: // swap two
				j := (i + 1) % len(p)
				p[i], p[j] = p[j], p[i]
			case 4: // change a byte
				if len(p[i].Data) > 0 {
					p[i].Data[int(b)%len(p[i].Data)] ^= b
				}
			case 5: // cut a piece short
				p[i].Data = p[i].Data[:len(p[i].Data)/2]
			case 6: // renumber a piece
				p[i].Header.Set(events.QueryReplyPieceHeader, string(rune(b)))
			case 7: // forge the digest
				p[len(p)-1].Header.Set(events.QueryReplyDigestHeader, digestPrefix+strings.Repeat(string(rune('0'+b%10)), 64))
			}
			return p
		})
		got, err := Reassemble(0, changed)
		if err != nil {
			if op%8 == 0 {
				t.Fatalf("the pieces as written: %v", err)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(got.Data, data) {
			t.Fatalf("Reassemble returned %q without an error, the reply was %q", got.Data, data)
		}
	})
}

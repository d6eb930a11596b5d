package bus

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
)

// FuzzDeadLetterMsg builds the dead-letter copy of a message with arbitrary
// headers, data and reason (a handler's error, which may quote the payload):
// the reason header is one line of at most maxReason bytes, valid UTF-8 when
// the reason was, and stable when cleaned again; no Nats-* header of the
// original reaches the copy, every other header does; the data is kept and
// the message id depends on the stream, sequence and consumer only.
func FuzzDeadLetterMsg(f *testing.F) {
	f.Add("ce-id: x\nNats-Msg-Id: abc\nnats-expected-stream: EVENTS", []byte(`{"name":"x"}`), "invalid payload:\n\tname: required", "placement-web")
	f.Add("", []byte{}, strings.Repeat("é", 600), "c")
	f.Add("Content-Type: application/json", []byte("\xff"), "a\r\nb\u2028c\u00a0d", "")
	f.Fuzz(func(t *testing.T, header string, data []byte, reason, consumer string) {
		h := nats.Header{}
		for line := range strings.SplitSeq(header, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) != "" {
				h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
		clean := oneLine(reason)
		if len(clean) > maxReason || strings.ContainsAny(clean, "\r\n") {
			t.Fatalf("oneLine(%q) = %q: %d bytes or a line break", reason, clean, len(clean))
		}
		if utf8.ValidString(reason) && !utf8.ValidString(clean) {
			t.Fatalf("oneLine(%q) = %q is not valid UTF-8", reason, clean)
		}
		if again := oneLine(clean); again != clean {
			t.Fatalf("oneLine is not stable: %q -> %q -> %q", reason, clean, again)
		}

		m := Meta{Subject: "flotilla.placement.web", Stream: "EVENTS", Consumer: consumer, Sequence: 7, NumDelivered: 3}
		dl, id := deadLetterMsg(h, data, m, clean)
		dl2, id2 := deadLetterMsg(h, data, m, "another reason")
		if id != id2 || dl.Subject != dl2.Subject {
			t.Fatalf("the dead-letter id depends on the reason: %q, %q", id, id2)
		}
		if dl.Subject != DeadLetterSubject(consumer) || !bytes.Equal(dl.Data, data) {
			t.Fatalf("dead letter on %q with data %q", dl.Subject, dl.Data)
		}
		for k := range dl.Header {
			if strings.HasPrefix(strings.ToLower(k), "nats-") {
				t.Fatalf("header %s reached the dead-letter copy", k)
			}
		}
		for k, vs := range h {
			if strings.HasPrefix(strings.ToLower(k), "nats-") || strings.HasPrefix(k, "Flotilla-Dead-Letter-") {
				continue
			}
			if got := dl.Header[k]; !slices.Equal(got, vs) {
				t.Fatalf("header %s = %q in the copy, %q in the original", k, got, vs)
			}
		}
		if got := dl.Header.Get(HeaderDeadLetterReason); got != clean {
			t.Fatalf("reason header %q, want %q", got, clean)
		}
	})
}

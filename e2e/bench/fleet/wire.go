package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// wire watches every message on the bus with a plain subscription on ">": publishes,
// JetStream deliveries to consumers' inboxes, API requests and replies, acks. A message's
// size is what NATS's max_payload bounds: its payload plus its encoded headers.
type wire struct {
	sub *nats.Subscription

	mu      sync.Mutex
	classes map[string]*wireClass
	largest []wireMsg // the largest message of each of the subjects with the largest, largest first
	event   wireMsg   // the largest message on a flotilla.> subject
}

// wireClass sums the messages of one kind (see classify).
type wireClass struct {
	count, bytes int64
	max          wireMsg
}

type wireMsg struct {
	subject string
	size    int
}

// largestKept is how many of the largest messages wire keeps.
const largestKept = 8

func watchWire(nc *nats.Conn) (*wire, error) {
	w := &wire{classes: map[string]*wireClass{}}
	sub, err := nc.Subscribe(">", w.observe)
	if err != nil {
		return nil, fmt.Errorf("watch the bus: %w", err)
	}
	// Never drop a message for being slow: the counts are the point.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	w.sub = sub
	return w, nil
}

func (w *wire) stop() { _ = w.sub.Unsubscribe() }

func (w *wire) observe(msg *nats.Msg) {
	size := len(msg.Data) + headerBytes(msg.Header)
	class := classify(msg)
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.classes[class]
	if c == nil {
		c = &wireClass{}
		w.classes[class] = c
	}
	c.count++
	c.bytes += int64(size)
	m := wireMsg{subject: msg.Subject, size: size}
	if size > c.max.size {
		c.max = m
	}
	if strings.HasPrefix(msg.Subject, "flotilla.") && size > w.event.size {
		w.event = m
	}
	if len(w.largest) < largestKept || size > w.largest[len(w.largest)-1].size {
		if i := slices.IndexFunc(w.largest, func(l wireMsg) bool { return l.subject == m.subject }); i >= 0 {
			w.largest[i].size = max(w.largest[i].size, size)
		} else {
			w.largest = append(w.largest, m)
		}
		slices.SortStableFunc(w.largest, func(a, b wireMsg) int { return b.size - a.size })
		w.largest = w.largest[:min(len(w.largest), largestKept)]
	}
}

// headerBytes is the size of h as NATS encodes it (NATS/1.0, then "key: value" lines).
func headerBytes(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// classify names the kind of a message: the first tokens of a Flotilla subject
// (flotilla.work, flotilla.status, ...), "deliver <stream>/<consumer>" for a JetStream
// delivery (its reply subject is the ack subject), the JetStream API call, or "other".
func classify(msg *nats.Msg) string {
	switch s := msg.Subject; {
	case strings.HasPrefix(msg.Reply, "$JS.ACK."):
		// $JS.ACK.<stream>.<consumer>.… or, with a domain and an account hash,
		// $JS.ACK.<domain>.<account>.<stream>.<consumer>.…
		switch t := strings.Split(msg.Reply, "."); {
		case len(t) >= 12:
			return "deliver " + t[4] + "/" + consumerKind(t[5])
		case len(t) >= 4:
			return "deliver " + t[2] + "/" + consumerKind(t[3])
		}
		return "deliver"
	case strings.HasPrefix(s, "flotilla."):
		t := strings.Split(s, ".")
		if len(t) > 2 && t[1] == "blob" {
			return strings.Join(t[:3], ".")
		}
		return strings.Join(t[:2], ".")
	case strings.HasPrefix(s, "$JS.API."):
		t := strings.Split(s, ".")
		return strings.Join(t[:min(len(t), 4)], ".")
	case strings.HasPrefix(s, "$JS.ACK."):
		return "ack"
	case strings.HasPrefix(s, "_INBOX.") && len(msg.Data) == 0:
		return "inbox status"
	case strings.HasPrefix(s, "_INBOX."):
		return "inbox reply"
	}
	return "other"
}

// consumerKind folds the per-member consumers together: apply-<cluster> is "apply-*".
func consumerKind(name string) string {
	if strings.HasPrefix(name, "apply-") {
		return "apply-*"
	}
	return name
}

// print writes the largest messages and the sums per kind, largest kind first.
func (w *wire) print(out io.Writer, limit int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(out, "  largest messages on the wire, one per subject (payload + headers; NATS max_payload %s):\n", bytesString(int64(limit)))
	for _, m := range w.largest {
		flag := ""
		if m.size > limit {
			flag = "  OVER max_payload"
		}
		fmt.Fprintf(out, "    %10s  %s%s\n", bytesString(int64(m.size)), m.subject, flag)
	}
	type row struct {
		name string
		c    *wireClass
	}
	var rows []row
	for n, c := range w.classes {
		rows = append(rows, row{n, c})
	}
	slices.SortFunc(rows, func(a, b row) int { return b.c.max.size - a.c.max.size })
	fmt.Fprintf(out, "  per kind:                               %10s %10s %10s\n", "messages", "bytes", "largest")
	for _, r := range rows {
		fmt.Fprintf(out, "    %-37s %10d %10s %10s\n", r.name, r.c.count, bytesString(r.c.bytes), bytesString(int64(r.c.max.size)))
	}
}

// maxSize is the largest message seen, and the largest Flotilla event (on flotilla.>).
func (w *wire) maxSize() (any, event wireMsg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.largest) > 0 {
		any = w.largest[0]
	}
	return any, w.event
}

func bytesString(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

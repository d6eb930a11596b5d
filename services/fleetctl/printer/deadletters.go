package printer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/bus"
)

// deadLetterResource prefixes dead-letter ids in -o name.
const deadLetterResource = "deadletter"

// DeadLetters prints dead letters, oldest first: a table with the reason (wide adds the
// event's id and where the message was), deadletter/ID for -o name, or the list in a structured format.
func (p Printer) DeadLetters(w io.Writer, dls []bus.DeadLetter) error {
	switch p.Output.Format {
	case Table, Wide:
		wide, now := p.Output.Format == Wide, p.now()
		columns := []string{"ID", "CONSUMER", "AGE", "DELIVERIES", "EVENT-TYPE", "SUBJECT", "REASON"}
		if wide {
			columns = []string{"ID", "CONSUMER", "AGE", "DELIVERIES", "EVENT-TYPE", "EVENT-ID", "SUBJECT", "STREAM", "SEQUENCE", "SIZE", "REASON"}
		}
		rows := make([][]string, 0, len(dls))
		for _, dl := range dls {
			age := Age(metav1.NewTime(dl.DeadAt), now)
			if wide {
				rows = append(rows, []string{id(dl.ID), dl.Consumer, age, strconv.FormatUint(dl.Deliveries, 10), orNone(dl.EventType),
					orNone(dl.EventID), dl.Subject, dl.Stream, strconv.FormatUint(dl.Sequence, 10), strconv.Itoa(dl.Size), dl.Reason})
				continue
			}
			rows = append(rows, []string{id(dl.ID), dl.Consumer, age, strconv.FormatUint(dl.Deliveries, 10), orNone(dl.EventType),
				dl.Subject, dl.Reason})
		}
		return p.table(w, columns, rows)
	case Name:
		for _, dl := range dls {
			fmt.Fprintf(w, "%s/%d\n", deadLetterResource, dl.ID)
		}
		return nil
	}
	if dls == nil {
		dls = []bus.DeadLetter{}
	}
	return printStructured(w, p.Output, dls)
}

// DeadLetterView is a dead letter as show prints it: where it was and why it was given up
// on, the message's headers, and its payload, with the values of any Secret in it redacted.
type DeadLetterView struct {
	bus.DeadLetter
	Headers map[string]string `json:"headers"`
	// Data is the payload when it is JSON; DataBase64 holds any other payload.
	Data       json.RawMessage `json:"data,omitempty"`
	DataBase64 string          `json:"dataBase64,omitempty"`
}

// NewDeadLetterView makes the view of dl.
func NewDeadLetterView(dl *bus.DeadLetter) DeadLetterView {
	v := DeadLetterView{DeadLetter: *dl, Headers: map[string]string{}}
	for k, vs := range dl.Headers {
		v.Headers[k] = strings.Join(vs, ", ")
	}
	if len(dl.Data) > 0 {
		if json.Valid(dl.Data) {
			v.Data = redactSecrets(dl.Data)
		} else {
			v.DataBase64 = base64.StdEncoding.EncodeToString(dl.Data)
		}
	}
	return v
}

// DeadLetter prints one dead letter with the message it holds: a description for table and
// wide, deadletter/ID for name, the view otherwise.
func (p Printer) DeadLetter(w io.Writer, dl *bus.DeadLetter) error {
	v := NewDeadLetterView(dl)
	switch p.Output.Format {
	case Name:
		_, err := fmt.Fprintf(w, "%s/%d\n", deadLetterResource, dl.ID)
		return err
	case Table, Wide:
	default:
		return printStructured(w, p.Output, v)
	}
	tw := newTabWriter(w)
	d := describer{w: tw, now: p.now()}
	d.field(0, "ID", dl.ID)
	d.field(0, "Consumer", dl.Consumer)
	d.field(0, "Stream", fmt.Sprintf("%s (sequence %d)", dl.Stream, dl.Sequence))
	d.field(0, "Subject", dl.Subject)
	d.field(0, "Event Type", orNone(dl.EventType))
	d.field(0, "Event ID", orNone(dl.EventID))
	d.field(0, "Event Source", orNone(dl.EventSource))
	d.field(0, "Deliveries", dl.Deliveries)
	d.field(0, "Dead Since", d.when(metav1.NewTime(dl.DeadAt)))
	d.field(0, "Reason", oneLine(dl.Reason))
	d.field(0, "Size", fmt.Sprintf("%d bytes", dl.Size))
	d.line(0, "Headers:")
	for _, k := range slices.Sorted(maps.Keys(v.Headers)) {
		d.field(1, k, oneLine(v.Headers[k]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The payload goes out as it is, past the column alignment.
	switch {
	case v.Data != nil:
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, v.Data, "  ", "  "); err != nil {
			return fmt.Errorf("print dead letter %d: %w", dl.ID, err)
		}
		_, err := fmt.Fprintf(w, "Data:\n  %s\n", pretty.String())
		return err
	case v.DataBase64 != "":
		_, err := fmt.Fprintf(w, "Data (base64):\n  %s\n", v.DataBase64)
		return err
	}
	return nil
}

// Redriven prints what redrive did with each dead letter.
func (p Printer) Redriven(w io.Writer, rs []bus.Redriven) error {
	switch p.Output.Format {
	case Table, Wide:
		rows := make([][]string, 0, len(rs))
		for _, r := range rs {
			seq := "-"
			if r.NewSequence > 0 {
				seq = strconv.FormatUint(r.NewSequence, 10)
			}
			rows = append(rows, []string{id(r.ID), r.Consumer, orNone(r.EventType), orNone(r.EventID), r.Subject, r.Outcome, seq})
		}
		return p.table(w, []string{"ID", "CONSUMER", "EVENT-TYPE", "EVENT-ID", "SUBJECT", "OUTCOME", "NEW-SEQUENCE"}, rows)
	case Name:
		for _, r := range rs {
			fmt.Fprintf(w, "%s/%d %s\n", deadLetterResource, r.ID, r.Outcome)
		}
		return nil
	}
	if rs == nil {
		rs = []bus.Redriven{}
	}
	return printStructured(w, p.Output, rs)
}

func id(n uint64) string { return strconv.FormatUint(n, 10) }

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// redacted replaces Secret values in printed payloads.
const redacted = "(redacted)"

// redactSecrets replaces the values of every Secret's data and stringData in a JSON payload
// (a hub resource, a work's manifests) with redacted, so that show prints no secret. A
// payload that does not decode is returned as it is (it is valid JSON).
func redactSecrets(data []byte) json.RawMessage {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return data
	}
	if !redactIn(v) {
		return data
	}
	out, err := json.Marshal(v)
	if err != nil {
		return data
	}
	return out
}

// redactIn redacts the Secrets found in v and reports whether it changed anything.
func redactIn(v any) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		if x["kind"] == "Secret" {
			for _, field := range []string{"data", "stringData"} {
				if values, ok := x[field].(map[string]any); ok {
					for k := range values {
						values[k] = redacted
						changed = true
					}
				}
			}
		}
		for _, child := range x {
			changed = redactIn(child) || changed
		}
	case []any:
		for _, child := range x {
			changed = redactIn(child) || changed
		}
	}
	return changed
}

package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Header names of the binary-mode mapping. Attributes and extensions travel as
// "ce-<name>" headers; datacontenttype travels as Content-Type, as in the
// CloudEvents HTTP and NATS bindings.
const (
	HeaderPrefix      = "ce-"
	HeaderContentType = "Content-Type"
)

// specs resolves "ce-"-prefixed header names (case-insensitively) to
// CloudEvents attributes, for every spec version the SDK knows.
var specs = spec.WithPrefix(HeaderPrefix)

// Encode turns a valid event into a NATS message in binary mode: attributes
// and extensions as ce- headers, datacontenttype as Content-Type, the data as
// the body.
func Encode(ev event.Event, subject string) (*nats.Msg, error) {
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("encode event %q: %w", ev.ID(), err)
	}
	msg := nats.NewMsg(subject)
	w := &headerWriter{header: msg.Header}
	// The structured writer is nil, so the SDK writes binary mode.
	if _, err := binding.Write(context.Background(), binding.ToMessage(&ev), nil, w); err != nil {
		return nil, fmt.Errorf("encode event %q: %w", ev.ID(), err)
	}
	msg.Data = w.body
	return msg, nil
}

// Decode reads a CloudEvent from a NATS message in binary mode (a
// ce-specversion header) or structured mode (Content-Type
// application/cloudevents+json), and validates it.
func Decode(msg *nats.Msg) (event.Event, error) {
	return decode(msg.Header, msg.Data)
}

// DecodeJetStream is Decode for a message received from a JetStream consumer.
func DecodeJetStream(msg jetstream.Msg) (event.Event, error) {
	return decode(msg.Headers(), msg.Data())
}

func decode(h nats.Header, data []byte) (event.Event, error) {
	m, err := newHeaderMessage(h, data)
	if err != nil {
		return event.Event{}, fmt.Errorf("decode cloudevent: %w", err)
	}
	ev, err := binding.ToEvent(context.Background(), m)
	if err != nil {
		return event.Event{}, fmt.Errorf("decode cloudevent: %w", err)
	}
	if err := ev.Validate(); err != nil {
		return event.Event{}, fmt.Errorf("decode cloudevent: %w", err)
	}
	return *ev, nil
}

// headerMessage is a binding.MessageReader over NATS headers and a body.
type headerMessage struct {
	header  nats.Header
	body    []byte
	version spec.Version  // set in binary mode
	format  format.Format // set in structured mode
}

// The SDK's binary path also reads attributes through
// binding.MessageMetadataReader.
var (
	_ binding.MessageReader         = (*headerMessage)(nil)
	_ binding.MessageMetadataReader = (*headerMessage)(nil)
)

func newHeaderMessage(h nats.Header, body []byte) (*headerMessage, error) {
	if err := duplicateHeader(h); err != nil {
		return nil, err
	}
	m := &headerMessage{header: h, body: body}
	// Binary mode wins when both are present: a ce-specversion header is
	// unambiguous, while Content-Type could describe the data.
	if sv, ok := headerValue(h, specs.PrefixedSpecVersionName()); ok {
		m.version = specs.Version(sv)
		if m.version == nil {
			return nil, fmt.Errorf("unsupported specversion %q", sv)
		}
		return m, nil
	}
	ct, _ := headerValue(h, HeaderContentType)
	m.format = format.Lookup(ct)
	switch {
	case m.format == nil:
		return nil, fmt.Errorf("not a CloudEvent: no %s header and content type %q is not a CloudEvents format",
			specs.PrefixedSpecVersionName(), ct)
	case m.format == format.JSONBatch:
		return nil, errors.New("batched CloudEvents are not supported")
	}
	return m, nil
}

func (m *headerMessage) ReadEncoding() binding.Encoding {
	if m.version != nil {
		return binding.EncodingBinary
	}
	return binding.EncodingStructured
}

func (m *headerMessage) ReadStructured(ctx context.Context, w binding.StructuredWriter) error {
	if m.format == nil {
		return binding.ErrNotStructured
	}
	return w.SetStructuredEvent(ctx, m.format, bytes.NewReader(m.body))
}

func (m *headerMessage) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	if m.version == nil {
		return binding.ErrNotBinary
	}
	// The spec version first, as the SDK chooses the event's attributes by
	// it, then the headers in a fixed order: a message decodes the same
	// whatever the order of the header map.
	if err := w.SetAttribute(m.version.AttributeFromKind(spec.SpecVersion), m.version.String()); err != nil {
		return fmt.Errorf("header %s: %w", specs.PrefixedSpecVersionName(), err)
	}
	for _, k := range slices.Sorted(maps.Keys(m.header)) {
		vs := m.header[k]
		if len(vs) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		var err error
		switch {
		case m.version.Attribute(lk) != nil && m.version.Attribute(lk).Kind() == spec.SpecVersion:
			continue // set above
		case lk == strings.ToLower(HeaderContentType):
			err = w.SetAttribute(m.version.AttributeFromKind(spec.DataContentType), vs[0])
		case m.version.Attribute(lk) != nil:
			err = w.SetAttribute(m.version.Attribute(lk), vs[0])
		case strings.HasPrefix(lk, HeaderPrefix):
			err = w.SetExtension(strings.TrimPrefix(lk, HeaderPrefix), vs[0])
		}
		if err != nil {
			return fmt.Errorf("header %s: %w", k, err)
		}
	}
	if len(m.body) > 0 {
		return w.SetData(bytes.NewReader(m.body))
	}
	return nil
}

func (m *headerMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	if m.version == nil {
		return nil, nil
	}
	a := m.version.AttributeFromKind(k)
	if a == nil {
		return nil, nil
	}
	name := HeaderPrefix + a.Name()
	if k == spec.DataContentType {
		name = HeaderContentType
	}
	if v, ok := headerValue(m.header, name); ok {
		return a, v
	}
	return a, nil
}

func (m *headerMessage) GetExtension(name string) any {
	if v, ok := headerValue(m.header, HeaderPrefix+strings.ToLower(name)); ok {
		return v
	}
	return nil
}

// duplicateHeader finds a CloudEvents header (ce-* or Content-Type) given
// under two spellings, such as ce-id and CE-ID: which one counts would depend
// on map order, so the event's id or type could change from one decode of the
// message to the next.
func duplicateHeader(h nats.Header) error {
	seen := make(map[string]string, len(h))
	for k := range h {
		lk := strings.ToLower(k)
		if lk != strings.ToLower(HeaderContentType) && !strings.HasPrefix(lk, HeaderPrefix) {
			continue
		}
		if other, dup := seen[lk]; dup {
			return fmt.Errorf("header %s appears twice, as %s and %s", lk, min(k, other), max(k, other))
		}
		seen[lk] = k
	}
	return nil
}

// headerValue looks a header up case-insensitively: nats.Header is
// case-sensitive, but other clients may capitalise differently.
func headerValue(h nats.Header, name string) (string, bool) {
	if vs, ok := h[name]; ok && len(vs) > 0 {
		return vs[0], true
	}
	for k, vs := range h {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0], true
		}
	}
	return "", false
}

// headerWriter is a binding.BinaryWriter into NATS headers and a body.
type headerWriter struct {
	header nats.Header
	body   []byte
}

var _ binding.BinaryWriter = (*headerWriter)(nil)

func (w *headerWriter) Start(context.Context) error { return nil }
func (w *headerWriter) End(context.Context) error   { return nil }

func (w *headerWriter) SetData(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read event data: %w", err)
	}
	w.body = b
	return nil
}

func (w *headerWriter) SetAttribute(a spec.Attribute, value any) error {
	key := HeaderPrefix + a.Name()
	if a.Kind() == spec.DataContentType {
		key = HeaderContentType
	}
	return w.set(key, value)
}

func (w *headerWriter) SetExtension(name string, value any) error {
	return w.set(HeaderPrefix+strings.ToLower(name), value)
}

func (w *headerWriter) set(key string, value any) error {
	if value == nil {
		delete(w.header, key)
		return nil
	}
	s, err := types.Format(value)
	if err != nil {
		return fmt.Errorf("attribute %s: %w", key, err)
	}
	// A line break would end the header in the NATS protocol.
	if strings.ContainsAny(s, "\r\n") {
		return fmt.Errorf("attribute %s: value contains a line break", key)
	}
	w.header.Set(key, s)
	return nil
}

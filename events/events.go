package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
)

// ErrUnknownType is returned for an event whose type is not in the catalogue.
var ErrUnknownType = errors.New("unknown event type")

// ErrInvalidPayload is returned for an event whose data does not decode into
// its type's payload, or whose payload breaks the payload's rules.
var ErrInvalidPayload = errors.New("invalid payload")

// Types lists every event type in the catalogue.
func Types() []string {
	out := make([]string, 0, len(catalogue))
	for t := range catalogue {
		out = append(out, t)
	}
	return out
}

// idSpace is the UUID namespace of deterministic event ids.
var idSpace = uuid.MustParse("6f0b7b3e-5a53-4f4e-9d0e-2b7f4c1f9a10")

// ID derives a deterministic event id from the parts that make an event
// unique, so that a retried publish produces the same id and the bus drops
// the copy.
func ID(parts ...string) string {
	return uuid.NewSHA1(idSpace, []byte(strings.Join(parts, "\x00"))).String()
}

// New builds a CloudEvent of a catalogued type. An empty id gets a random one;
// pass ID(...) where a retry must dedupe.
func New(typ, source, subject, id string, payload any) (cloudevents.Event, error) {
	if _, ok := catalogue[typ]; !ok {
		return cloudevents.Event{}, fmt.Errorf("new event: %w %q", ErrUnknownType, typ)
	}
	if id == "" {
		id = uuid.NewString()
	}
	ev := cloudevents.New()
	ev.SetID(id)
	ev.SetType(typ)
	ev.SetSource(source)
	ev.SetSubject(subject)
	ev.SetTime(time.Now().UTC())
	if err := ev.SetData("application/json", payload); err != nil {
		return cloudevents.Event{}, fmt.Errorf("new event %s: %w", typ, err)
	}
	checked, err := validateValue(catalogue[typ], payload)
	if err != nil {
		return cloudevents.Event{}, fmt.Errorf("%w: %s: %v", ErrInvalidPayload, typ, err)
	}
	if checked {
		if err := ev.Validate(); err != nil {
			return cloudevents.Event{}, fmt.Errorf("invalid cloudevent: %w", err)
		}
		return ev, nil
	}
	if err := Validate(ev); err != nil {
		return cloudevents.Event{}, err
	}
	return ev, nil
}

// validateValue checks a payload of the type's own Go type (or a pointer to one) by the
// type's rules, without decoding the JSON it was just encoded to: a value of that type
// encodes to JSON that decodes to it, so the round trip would check nothing more, and
// on the services' hot paths (status changes, work) it cost as much as the rest of the
// event. checked is false for any other payload (a map, raw JSON), which New decodes.
func validateValue(e entry, payload any) (checked bool, err error) {
	want := reflect.TypeOf(e.new())
	v := reflect.ValueOf(payload)
	switch {
	case !v.IsValid():
		return false, nil
	case v.Type() == want:
		if v.IsNil() {
			return false, nil
		}
		return true, e.validate(payload)
	case v.Type() == want.Elem():
		// A copy, so that the rules see a pointer as after decoding.
		p := reflect.New(want.Elem())
		p.Elem().Set(v)
		return true, e.validate(p.Interface())
	}
	return false, nil
}

// Decode returns the typed payload of ev (a pointer, e.g. *PlacementUpserted).
// Unknown fields are an error: a producer on a newer schema must use a new type.
func Decode(ev cloudevents.Event) (any, error) {
	e, ok := catalogue[ev.Type()]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownType, ev.Type())
	}
	p := e.new()
	dec := json.NewDecoder(bytes.NewReader(ev.Data()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("%w: %s data: %v", ErrInvalidPayload, ev.Type(), err)
	}
	if err := e.validate(p); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidPayload, ev.Type(), err)
	}
	return p, nil
}

// DecodeAs decodes ev's payload into a T, e.g. DecodeAs[PlacementUpserted](ev).
func DecodeAs[T any](ev cloudevents.Event) (*T, error) {
	p, err := Decode(ev)
	if err != nil {
		return nil, err
	}
	t, ok := p.(*T)
	if !ok {
		var zero T
		return nil, fmt.Errorf("%w: event %s carries %T, not %T", ErrInvalidPayload, ev.Type(), p, &zero)
	}
	return t, nil
}

// Validate reports whether ev is a valid CloudEvent of a known type whose
// payload decodes and passes its rules. Consumers dead-letter what fails it.
func Validate(ev cloudevents.Event) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("invalid cloudevent: %w", err)
	}
	_, err := Decode(ev)
	return err
}

// ExtensionLast is the CloudEvents extension attribute that marks the last
// event of one publisher's burst: the last change of a `fleetctl apply`, or
// of one of hubsync's passes. Nothing that publisher is sending follows it,
// so the rollout cuts the snapshots the burst's hub changes concern at once
// rather than waiting for the burst to pause (its coalescing window). Its
// value is "true". An event without it changes nothing: the window applies.
const ExtensionLast = "flotillalast"

// MarkLast marks ev as the last of its publisher's burst (ExtensionLast).
func MarkLast(ev *cloudevents.Event) {
	ev.SetExtension(ExtensionLast, "true")
}

// IsLast reports whether ev is marked as the last of its publisher's burst.
func IsLast(ev cloudevents.Event) bool {
	v, _ := ev.Extensions()[ExtensionLast].(string)
	return v == "true"
}

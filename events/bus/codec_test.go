package bus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events/bus"
)

func fullEvent(t *testing.T) event.Event {
	t.Helper()
	ev := newEvent(t, "evt-1", "io.flotilla.placement.scheduled.v1")
	ev.SetSubject("placement/web/cluster/member-1")
	ev.SetTime(time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC))
	ev.SetDataSchema("https://flotilla.dev/schemas/placement.scheduled.v1.json")
	ev.SetExtension("cluster", "member-1")
	ev.SetExtension("placement", "web.shop")
	return ev
}

func TestEncodeIsBinaryMode(t *testing.T) {
	ev := fullEvent(t)
	msg, err := bus.Encode(ev, "flotilla.placement.web")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ce-specversion": "1.0",
		"ce-id":          "evt-1",
		"ce-source":      "/flotilla/test",
		"ce-type":        "io.flotilla.placement.scheduled.v1",
		"ce-subject":     "placement/web/cluster/member-1",
		"ce-time":        "2025-03-04T05:06:07.123456789Z",
		"ce-dataschema":  "https://flotilla.dev/schemas/placement.scheduled.v1.json",
		"ce-cluster":     "member-1",
		"ce-placement":   "web.shop",
		"Content-Type":   "application/json",
	}
	for k, v := range want {
		if got := msg.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if len(msg.Header) != len(want) {
		t.Errorf("headers = %v, want exactly %v", msg.Header, want)
	}
	if got := string(msg.Data); got != `{"name":"evt-1"}` {
		t.Errorf("body = %s, want the event data", got)
	}
	if msg.Subject != "flotilla.placement.web" {
		t.Errorf("subject = %q", msg.Subject)
	}
}

func TestDecodeBinaryRoundTrip(t *testing.T) {
	ev := fullEvent(t)
	msg, err := bus.Encode(ev, "flotilla.placement.web")
	if err != nil {
		t.Fatal(err)
	}
	got, err := bus.Decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, got), mustJSON(t, ev); a != b {
		t.Errorf("round trip changed the event:\n got %s\nwant %s", a, b)
	}
}

func TestDecodeAcceptsOtherHeaderCase(t *testing.T) {
	h := nats.Header{
		"Ce-Specversion": {"1.0"},
		"Ce-Id":          {"x"},
		"Ce-Source":      {"/s"},
		"Ce-Type":        {"t"},
		"Ce-Myext":       {"v"},
		"content-type":   {"text/plain"},
	}
	got, err := bus.Decode(&nats.Msg{Header: h, Data: []byte("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != "x" || got.Extensions()["myext"] != "v" || got.DataContentType() != "text/plain" || string(got.Data()) != "hi" {
		t.Errorf("decoded %s", got)
	}
}

func TestDecodeStructuredJSON(t *testing.T) {
	ev := fullEvent(t)
	body := mustJSON(t, ev)
	msg := &nats.Msg{
		Header: nats.Header{"Content-Type": {"application/cloudevents+json; charset=utf-8"}},
		Data:   []byte(body),
	}
	got, err := bus.Decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	if a := mustJSON(t, got); a != body {
		t.Errorf("structured decode:\n got %s\nwant %s", a, body)
	}
}

func TestDecodeRejects(t *testing.T) {
	valid := func() nats.Header {
		return nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-source": {"/s"}, "ce-type": {"t"}}
	}
	noID := valid()
	delete(noID, "ce-id")
	badVersion := valid()
	badVersion.Set("ce-specversion", "9.9")
	badTime := valid()
	badTime.Set("ce-time", "yesterday")

	tests := []struct {
		name   string
		header nats.Header
		body   string
	}{
		{"garbage without headers", nil, "\xff\x00garbage"},
		{"plain JSON without ce headers", nats.Header{"Content-Type": {"application/json"}}, `{"id":"x"}`},
		{"missing id", noID, ""},
		{"unknown specversion", badVersion, ""},
		{"bad time", badTime, ""},
		{"structured but not JSON", nats.Header{"Content-Type": {"application/cloudevents+json"}}, "not json"},
		{"structured without required attributes", nats.Header{"Content-Type": {"application/cloudevents+json"}}, `{"specversion":"1.0","id":"x"}`},
		{"batch", nats.Header{"Content-Type": {"application/cloudevents-batch+json"}}, `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := bus.Decode(&nats.Msg{Header: tt.header, Data: []byte(tt.body)})
			if err == nil {
				t.Fatalf("Decode accepted %s", ev)
			}
			t.Logf("rejected: %v", err)
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	t.Run("invalid event", func(t *testing.T) {
		ev := event.New()
		ev.SetType("t") // no id, no source
		if _, err := bus.Encode(ev, "flotilla.placement.x"); err == nil {
			t.Fatal("Encode accepted an event without id and source")
		}
	})
	t.Run("line break in a header value", func(t *testing.T) {
		ev := newEvent(t, "x", "t")
		ev.SetSubject("two\r\nlines")
		_, err := bus.Encode(ev, "flotilla.placement.x")
		if err == nil || !strings.Contains(err.Error(), "line break") {
			t.Fatalf("Encode error = %v, want a line break error", err)
		}
	})
}

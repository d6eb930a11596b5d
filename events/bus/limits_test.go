package bus_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
)

// Every stream has a byte limit, and the streams members publish into bound each subject
// and each message; WORK keeps the last value per subject and never ages out.
func TestEveryStreamIsBounded(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	d := bus.DefaultStreamLimits
	for _, cfg := range (bus.TopologyOptions{}).Streams() {
		s, err := js.Stream(t.Context(), cfg.Name)
		if err != nil {
			t.Fatal(err)
		}
		got := s.CachedInfo().Config
		if got.MaxBytes <= 0 {
			t.Errorf("%s has no byte limit", cfg.Name)
		}
		switch cfg.Name {
		case bus.StreamEvents:
			if got.MaxMsgSize != d.EventsMaxMsgSize || got.MaxMsgsPerSubject != d.EventsMaxMsgsPerSubject || got.MaxAge <= 0 || got.Discard != jetstream.DiscardOld {
				t.Errorf("EVENTS: %+v", got)
			}
		case bus.StreamWork:
			if got.MaxMsgsPerSubject != 1 || got.MaxAge != 0 || got.Discard != jetstream.DiscardNew || got.MaxMsgSize != d.WorkMaxMsgSize {
				t.Errorf("WORK must keep its last value per subject for ever and refuse rather than drop: %+v", got)
			}
		case bus.StreamWorkBlobs, bus.StreamHubBlobs:
			if got.Discard != jetstream.DiscardNew {
				t.Errorf("%s drops blobs when full", cfg.Name)
			}
		case bus.StreamDeadLetter:
			if got.MaxMsgsPerSubject != d.DeadLetterMaxMsgsPerSubject || got.MaxAge <= 0 {
				t.Errorf("DEADLETTER: %+v", got)
			}
		}
	}
}

func publish(t *testing.T, js jetstream.JetStream, subject string, size int) error {
	t.Helper()
	_, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: subject, Data: bytes.Repeat([]byte("x"), size)})
	return err
}

// What one member can store on its subjects is bounded: each subject keeps its newest
// messages up to the limit, and a message over the size limit is refused. Other subjects
// keep theirs.
func TestAMemberFloodingItsSubjectsIsBounded(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{Limits: bus.StreamLimits{EventsMaxMsgsPerSubject: 10, EventsMaxMsgSize: 4096, DeadLetterMaxMsgsPerSubject: 5}})
	if err := publish(t, js, "flotilla.placement.web", 100); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := publish(t, js, "flotilla.member.member-1", 100); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
		if err := publish(t, js, fmt.Sprintf("flotilla.workstatus.member-1.p%d", i%3), 100); err != nil {
			t.Fatal(err)
		}
		if err := publish(t, js, "flotilla.deadletter.apply-member-1", 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(t, js, "flotilla.member.member-1", 5000); err == nil {
		t.Error("a message over the size limit was stored")
	}
	counts := func(stream, filter string) uint64 {
		t.Helper()
		s, err := js.Stream(t.Context(), stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(filter))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range info.State.Subjects {
			n += c
		}
		return n
	}
	for _, c := range []struct {
		stream, filter string
		want           uint64
	}{
		{bus.StreamEvents, "flotilla.member.member-1", 10},
		{bus.StreamEvents, "flotilla.workstatus.member-1.>", 30},
		{bus.StreamEvents, "flotilla.placement.>", 1},
		{bus.StreamDeadLetter, "flotilla.deadletter.>", 5},
	} {
		if got := counts(c.stream, c.filter); got != c.want {
			t.Errorf("%s %s holds %d messages, want %d", c.stream, c.filter, got, c.want)
		}
	}
}

// The events stream drops its oldest events when full; the work stream refuses new
// subjects instead, and still takes a subject's replacement, so no cluster loses its last
// desired state.
func TestFullStreams(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{Limits: bus.StreamLimits{EventsMaxBytes: 64 << 10, WorkMaxBytes: 64 << 10}})
	for i := range 200 {
		if err := publish(t, js, "flotilla.placement.web", 1000); err != nil {
			t.Fatalf("event %d refused: %v", i, err)
		}
	}
	events, _ := js.Stream(t.Context(), bus.StreamEvents)
	info, err := events.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Bytes > 64<<10 || info.State.LastSeq != 200 || info.State.FirstSeq == 1 {
		t.Errorf("EVENTS: %d bytes, sequences %d to %d; want the newest within 64 KiB", info.State.Bytes, info.State.FirstSeq, info.State.LastSeq)
	}

	var refused error
	n := 0
	for ; n < 200 && refused == nil; n++ {
		refused = publish(t, js, fmt.Sprintf("flotilla.work.member-1.p%d", n), 1000)
	}
	if refused == nil {
		t.Fatal("WORK took 200 KB over a 64 KiB limit")
	}
	work, _ := js.Stream(t.Context(), bus.StreamWork)
	if _, err := work.GetLastMsgForSubject(t.Context(), "flotilla.work.member-1.p0"); err != nil {
		t.Errorf("the first cluster's work was dropped to make room: %v", err)
	}
	if err := publish(t, js, "flotilla.work.member-1.p0", 900); err != nil {
		t.Errorf("a full WORK refused a subject's replacement: %v", err)
	}
	last, err := work.GetLastMsgForSubject(t.Context(), "flotilla.work.member-1.p0")
	if err != nil || len(last.Data) != 900 {
		t.Errorf("p0's last value: %v", err)
	}
}

// A bus declared before streams had limits takes them when a service starts.
func TestLimitsReachExistingStreams(t *testing.T) {
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range (bus.TopologyOptions{}).Streams() {
		cfg.MaxBytes, cfg.MaxMsgSize, cfg.Discard = -1, -1, jetstream.DiscardOld
		if cfg.Name != bus.StreamWork && cfg.Name != bus.StreamWorkBlobs && cfg.Name != bus.StreamHubBlobs {
			cfg.MaxMsgsPerSubject = -1
		}
		if _, err := js.CreateStream(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(t, js, "flotilla.work.member-1.web", 100); err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatalf("the limits do not apply to existing streams: %v", err)
	}
	work, _ := js.Stream(t.Context(), bus.StreamWork)
	info, err := work.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxBytes != bus.DefaultStreamLimits.WorkMaxBytes || info.Config.Discard != jetstream.DiscardNew || info.State.Msgs != 1 {
		t.Errorf("WORK after the update: %+v, %d messages", info.Config, info.State.Msgs)
	}
}

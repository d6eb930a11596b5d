package bus

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A stream as the server reports it, its defaults filled in, is the configuration that
// made it; any setting changed, including one set back to its default, is not.
func TestSameStreamConfig(t *testing.T) {
	want := jetstream.StreamConfig{
		Name: "EVENTS", Subjects: []string{"flotilla.placement.>"}, Retention: jetstream.LimitsPolicy,
		MaxAge: 24 * time.Hour, MaxBytes: 1 << 30, Metadata: map[string]string{"owner": "flotilla"},
	}
	// What nats-server 2.15 reports for it.
	cur := want
	cur.MaxConsumers, cur.MaxMsgs, cur.MaxMsgSize, cur.MaxMsgsPerSubject = -1, -1, -1, -1
	cur.Duplicates, cur.Replicas = 2*time.Minute, 1
	cur.Metadata = map[string]string{"owner": "flotilla", "_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.2"}
	if !sameStreamConfig(cur, want) {
		t.Fatal("the stream the server reports for a configuration reads as another configuration")
	}

	short := want
	short.MaxAge = time.Minute
	shortCur := cur
	shortCur.MaxAge, shortCur.Duplicates = time.Minute, time.Minute
	if !sameStreamConfig(shortCur, short) {
		t.Error("a duplicate window the server cut to MaxAge reads as a change")
	}

	for name, change := range map[string]func(*jetstream.StreamConfig){
		"MaxAge back to unlimited": func(c *jetstream.StreamConfig) { c.MaxAge = 0 },
		"MaxBytes":                 func(c *jetstream.StreamConfig) { c.MaxBytes = 2 << 30 },
		"a subject added":          func(c *jetstream.StreamConfig) { c.Subjects = append(c.Subjects, "flotilla.member.>") },
		"MaxMsgsPerSubject":        func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 },
		"metadata dropped":         func(c *jetstream.StreamConfig) { c.Metadata = nil },
		"retention":                func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy },
	} {
		changed := want
		changed.Subjects = append([]string(nil), want.Subjects...)
		change(&changed)
		if sameStreamConfig(cur, changed) {
			t.Errorf("%s: the change reads as the same configuration", name)
		}
	}
}

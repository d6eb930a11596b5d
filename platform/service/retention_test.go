package service

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRetentionFlags(t *testing.T) {
	var cfg testConfig
	code := runMain("widgetd", &cfg, func(context.Context) error { return nil },
		[]string{"--database-url", "postgres://db", "--inbox-retention", "10d", "--outbox-retention", "6h", "--prune-interval", "1m"})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if r := cfg.Retention; r.Inbox != 240*time.Hour || r.Outbox != 6*time.Hour || r.Every != time.Minute {
		t.Errorf("retention = %+v", r)
	}
	rules := cfg.Retention.Rules()
	if len(rules) != 2 || rules[0].Table != "inbox" || rules[0].Keep != 240*time.Hour || rules[1].Table != "outbox" || rules[1].Keep != 6*time.Hour {
		t.Errorf("rules = %v", rules)
	}
	if d := (Retention{}).Rules(); d[0].Keep != DefaultInboxRetention || d[1].Keep != DefaultOutboxRetention {
		t.Errorf("default rules = %v", d)
	}
}

// The inbox must outlive the events stream: an event still in the stream can be
// delivered again, and only its inbox row makes that harmless.
func TestInboxRetentionCoversTheEventsStream(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--inbox-retention", "1d"}, "--inbox-retention: 24h0m0s is shorter than the events stream keeps events (168h0m0s)"},
		{[]string{"--outbox-retention", "-1h"}, "--outbox-retention: -1h0m0s is negative"},
		{[]string{"--inbox-retention", "eight days"}, ""},
	} {
		var cfg testConfig
		code := runMain("widgetd", &cfg, func(context.Context) error { t.Error("ran"); return nil }, append([]string{"--database-url", "postgres://db"}, tt.args...))
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tt.args, code)
		}
		if tt.want != "" {
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
			}
		}
	}
}

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "36h": 36 * time.Hour, "0d": 0} {
		if got, err := ParseRetention(in); err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"d", "1.5d", "-3d", "soon"} {
		if _, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) passed", in)
		}
	}
}

func TestStreamLimitFlags(t *testing.T) {
	var cfg testConfig
	code := runMain("widgetd", &cfg, func(context.Context) error { return nil }, []string{"--database-url", "postgres://db",
		"--events-max-age", "3d", "--events-max-bytes", "10GiB", "--events-max-msg-size", "2MiB", "--events-max-msgs-per-subject", "1000",
		"--work-max-bytes", "-1", "--work-blobs-max-bytes", "3G", "--hub-blobs-max-bytes", "1024", "--dead-letter-max-bytes", "64MiB"})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	l := cfg.Topology.Limits
	if cfg.Topology.EventsMaxAge != 72*time.Hour || l.EventsMaxBytes != 10<<30 || l.EventsMaxMsgSize != 2<<20 || l.EventsMaxMsgsPerSubject != 1000 ||
		l.WorkMaxBytes != -1 || l.WorkBlobsMaxBytes != 3<<30 || l.HubBlobsMaxBytes != 1024 || l.DeadLetterMaxBytes != 64<<20 {
		t.Errorf("topology = %+v", cfg.Topology)
	}
	for _, bad := range [][]string{{"--events-max-msg-size", "3GiB"}, {"--events-max-bytes", "lots"}, {"--events-max-bytes", "-2"}, {"--events-max-age", "30d"}} {
		var cfg testConfig
		if code := runMain("widgetd", &cfg, func(context.Context) error { t.Error("ran"); return nil }, append([]string{"--database-url", "postgres://db"}, bad...)); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

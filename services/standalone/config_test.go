package standalone

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestConfigSaysWhatIsMissing(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // in the error; "" for none
	}{
		{"no members", Config{}, "--local-members N"},
		{"negative", Config{LocalMembers: -1}, "must not be negative"},
		{"example without local members", Config{KubeconfigDir: "k", Example: true}, "--example needs --local-members"},
		{"bad listen address", Config{LocalMembers: 1, NATSListen: "4222"}, "--nats-listen"},
		{"port out of range", Config{LocalMembers: 1, NATSListen: "127.0.0.1:70000"}, "0 to 65535"},
		{"bad metrics address", Config{LocalMembers: 1, MetricsListen: "8081"}, "--metrics-listen"},
		{"local members", Config{LocalMembers: 3, Example: true}, ""},
		{"kubeconfig dir", Config{KubeconfigDir: "k"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.cfg.prepare()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.NATSListen != DefaultNATSListen || !strings.HasSuffix(cfg.DataDir, DefaultDataDir) || cfg.Out == nil {
					t.Errorf("defaults not filled in: %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestLocalMembersSpreadAcrossRegions(t *testing.T) {
	want := []string{"east", "west", "central", "east"}
	for i, region := range want {
		labels := LocalMemberLabels(i + 1)
		if labels["region"] != region || labels["environment"] != "production" {
			t.Errorf("member-%d: labels %v, want region %s and environment production", i+1, labels, region)
		}
		if labels["fleet.azure.com/location"] == "" {
			t.Errorf("member-%d has no fleet.azure.com/location label", i+1)
		}
	}
}

// The collector's target: GCPercent when set, GOGC from the environment over the default,
// and the previous setting back when Run ends.
func TestGCPercent(t *testing.T) {
	current := func() int { // SetGCPercent returns the previous value
		v := debug.SetGCPercent(100)
		debug.SetGCPercent(v)
		return v
	}
	before := current()
	tests := []struct {
		name string
		pct  int
		gogc string
		want int
	}{
		{"default", 0, "", DefaultGCPercent},
		{"set", 250, "", 250},
		{"GOGC wins over the default", 0, "150", before},
		{"set wins over GOGC", 250, "150", 250},
		{"negative keeps Go's", -1, "", before},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOGC", tt.gogc)
			restore := setGCPercent(tt.pct)
			if got := current(); got != tt.want {
				t.Errorf("collector target %d, want %d", got, tt.want)
			}
			restore()
			if got := current(); got != before {
				t.Errorf("after Run: collector target %d, want %d back", got, before)
			}
		})
	}
}

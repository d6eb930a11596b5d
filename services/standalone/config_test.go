package standalone

import (
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

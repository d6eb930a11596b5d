package service

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
)

// testConfig is a service Config with a flag and a rule of its own.
type testConfig struct {
	Options
	Widgets int
}

func (c *testConfig) RegisterFlags(fs *flag.FlagSet) { fs.IntVar(&c.Widgets, "widgets", 1, "widgets") }

func (c *testConfig) Validate() error {
	errs := []error{c.Options.Validate()}
	if c.Widgets < 0 {
		errs = append(errs, errors.New("--widgets must not be negative"))
	}
	return errors.Join(errs...)
}

func TestMainFillsValidatesAndRuns(t *testing.T) {
	t.Setenv(EnvDatabaseURL, "postgres://db/flotilla")
	t.Setenv(EnvLogLevel, "debug")
	var cfg testConfig
	var ran bool
	code := runMain("widgetd", &cfg, func(ctx context.Context) error { ran = true; return nil },
		[]string{"--nats", "nats://bus:4222", "--widgets", "3", "--stream-replicas", "3", "--log-format", "text"})
	if code != 0 || !ran {
		t.Fatalf("exit %d, ran %v", code, ran)
	}
	if cfg.NATS.URL != "nats://bus:4222" || cfg.DatabaseURL != "postgres://db/flotilla" || cfg.Widgets != 3 ||
		cfg.Topology.Replicas != 3 || cfg.LogLevel != "debug" || cfg.Logger == nil {
		t.Errorf("config = %+v", cfg)
	}
}

func TestMainRefusesABadCommandLineBeforeRunning(t *testing.T) {
	for name, args := range map[string][]string{
		"own rule":         {"--database-url", "postgres://db", "--widgets", "-1"},
		"shared rule":      {"--database-url", "postgres://db", "--log-format", "xml"},
		"no database":      {"--database-url", ""},
		"unknown flag":     {"--database-url", "postgres://db", "--nope"},
		"stray argument":   {"--database-url", "postgres://db", "extra"},
		"too many streams": {"--database-url", "postgres://db", "--stream-replicas", "7"},
		"negative limit":   {"--database-url", "postgres://db", "--outbox-max-bytes", "-1"},
	} {
		t.Run(name, func(t *testing.T) {
			var cfg testConfig
			code := runMain("widgetd", &cfg, func(context.Context) error { t.Error("ran"); return nil }, args)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
		})
	}
}

func TestMainExitsOneWhenRunFails(t *testing.T) {
	var cfg testConfig
	code := runMain("widgetd", &cfg, func(context.Context) error { return errors.New("boom") }, []string{"--database-url", "postgres://db"})
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}

func TestMemberServicesTakeNoDatabase(t *testing.T) {
	cfg := testConfig{Options: Options{Role: Member}}
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	cfg.Options.Register(fs)
	if fs.Lookup("database-url") != nil || fs.Lookup("migrate-only") != nil || fs.Lookup("stream-replicas") != nil {
		t.Error("a member service offers database or stream flags")
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("a member service without a database: %v", err)
	}
}

func TestValidateReportsEveryProblemWithItsFlag(t *testing.T) {
	o := Options{NATS: natsSettings("ftp://x"), LogLevel: "loud", HealthAddr: "nope", Topology: topology(-1)}
	err := o.Validate()
	if err == nil {
		t.Fatal("passed")
	}
	for _, want := range []string{"--nats", "--database-url", "--log-level", "--health-addr", "--stream-replicas"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func natsSettings(url string) natsconn.Settings { return natsconn.Settings{URL: url} }

func topology(replicas int) bus.TopologyOptions { return bus.TopologyOptions{Replicas: replicas} }

// Every service, hub or member (the apply workers), takes NATS's TLS files and credentials.
func TestEveryServiceTakesNATSTLSAndCredentials(t *testing.T) {
	for _, role := range []Role{Hub, Member} {
		cfg := testConfig{Options: Options{Role: role}}
		fs := flag.NewFlagSet("svc", flag.ContinueOnError)
		cfg.Options.Register(fs)
		for _, name := range []string{"nats", "nats-creds", "nats-ca", "nats-cert", "nats-key"} {
			if fs.Lookup(name) == nil {
				t.Errorf("role %d has no --%s", role, name)
			}
		}
	}
}

package service

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
)

// Role says what a service may touch on the bus and whether it keeps a database.
type Role int

const (
	// Hub services (scheduler, rollout, status) declare the JetStream topology, keep a
	// PostgreSQL database and relay its outbox.
	Hub Role = iota
	// Member services (apply workers) run with a member's restricted credentials: no
	// database, and they may not declare streams.
	Member
	// Connector services (hubsync) bring events in from elsewhere, as fleetctl does: no
	// database, and the streams are the hub services' to declare.
	Connector
)

// Environment variables that give the shared flags their defaults.
const (
	EnvDatabaseURL    = "DATABASE_URL"
	EnvStreamReplicas = "FLOTILLA_STREAM_REPLICAS"
	EnvLogFormat      = "FLOTILLA_LOG_FORMAT"
	EnvLogLevel       = "FLOTILLA_LOG_LEVEL"
	EnvHealthAddr     = "FLOTILLA_HEALTH_ADDR"
)

// DefaultHealthAddr is where /healthz, /readyz and /metrics are served unless told otherwise.
const DefaultHealthAddr = ":8081"

// Timeouts of handlers and statements unless told otherwise. A statement runs inside a
// handler, so the statement timeout is the shorter: a statement stuck on a lock fails with
// its own error before the handler's context ends.
const (
	DefaultHandlerTimeout   = 2 * time.Minute
	DefaultStatementTimeout = 30 * time.Second
)

// Options are the settings every Flotilla service embeds in its Config. Main fills the
// flagged ones from the command line and the environment; programs that run services in
// process (the standalone, tests) set them directly.
type Options struct {
	// Role is the kind of service; it decides which flags exist and what Open does.
	Role Role
	// NATS says how to reach the bus.
	NATS natsconn.Settings
	// DatabaseURL is the PostgreSQL connection string (hub services only).
	DatabaseURL string
	// MigrateOnly applies the migrations and returns (hub services only).
	MigrateOnly bool
	// LogFormat is json or text; LogLevel debug, info, warn or error.
	LogFormat, LogLevel string
	// HealthAddr, when set, serves /healthz, /readyz and /metrics there.
	HealthAddr string
	// Metrics is the registry the service's metrics go to, each with a service
	// label. Nil: a registry of the service's own, with the Go runtime's and
	// the process's metrics. The standalone passes one to all its services.
	Metrics *prometheus.Registry
	// Topology tunes the streams and consumers: --stream-replicas sets Replicas, tests
	// shorten timeouts.
	Topology bus.TopologyOptions
	// OutboxMaxBytes is the largest event (headers and payload) a hub service enqueues;
	// a larger one is quarantined. 0, or more than the server's max_payload, means the
	// server's max_payload.
	OutboxMaxBytes int64
	// Retention bounds the inbox and the published outbox rows (hub services only).
	Retention Retention
	// HandlerTimeout bounds one call of a consumer's handler (one event, or one batch in
	// one transaction). Default DefaultHandlerTimeout.
	HandlerTimeout time.Duration
	// StatementTimeout is PostgreSQL's statement_timeout on the service's pool (hub
	// services only). Default DefaultStatementTimeout; a statement_timeout in DatabaseURL
	// wins.
	StatementTimeout time.Duration
	// RetryBase and RetryMax pace the redeliveries of an event whose handler fails (default
	// 250ms doubling up to 30s); with Topology.MaxDeliver they make the budget of an event
	// that keeps failing. An outage uses none of it. Tests shorten them.
	RetryBase, RetryMax time.Duration

	// NATSOptions are extra connection options (nats.InProcessServer for the standalone).
	NATSOptions []nats.Option
	// Logger is the service's logger; Main builds it from LogFormat and LogLevel, and
	// slog.Default() stands in when it is nil.
	Logger *slog.Logger
}

// Register adds the shared flags to fs, with defaults from the environment.
func (o *Options) Register(fs *flag.FlagSet) {
	o.NATS.Register(fs, nil)
	if o.Role == Hub {
		fs.StringVar(&o.DatabaseURL, "database-url", os.Getenv(EnvDatabaseURL), "PostgreSQL connection string (env "+EnvDatabaseURL+")")
		fs.BoolVar(&o.MigrateOnly, "migrate-only", false, "apply the database migrations and exit")
		replicas, _ := strconv.Atoi(os.Getenv(EnvStreamReplicas))
		fs.IntVar(&o.Topology.Replicas, "stream-replicas", replicas, "replicas of the JetStream streams (3 on a 3-node NATS cluster; default 1; env "+EnvStreamReplicas+")")
		fs.DurationVar(&o.StatementTimeout, "statement-timeout", 0, fmt.Sprintf("PostgreSQL statement_timeout of the service's connections (default %s)", DefaultStatementTimeout))
		fs.Int64Var(&o.OutboxMaxBytes, "outbox-max-bytes", 0, "largest event the outbox lets through, headers and payload; larger ones are quarantined (default and at most: the NATS server's max_payload)")
		o.Retention.register(fs)
		o.registerStreamLimits(fs)
	}
	fs.DurationVar(&o.HandlerTimeout, "handler-timeout", 0, fmt.Sprintf("how long handling one event (or one batch) may take before it is retried (default %s)", DefaultHandlerTimeout))
	fs.StringVar(&o.LogFormat, "log-format", envOr(EnvLogFormat, "json"), "log format: json or text (env "+EnvLogFormat+")")
	fs.StringVar(&o.LogLevel, "log-level", envOr(EnvLogLevel, "info"), "log level: debug, info, warn or error (env "+EnvLogLevel+")")
	fs.StringVar(&o.HealthAddr, "health-addr", envOr(EnvHealthAddr, DefaultHealthAddr), "address of /healthz, /readyz and /metrics; empty: off (env "+EnvHealthAddr+")")
}

// Validate checks the options once, reporting every problem with its flag.
func (o *Options) Validate() error {
	errs := []error{o.NATS.Validate()}
	if o.Role == Hub && o.DatabaseURL == "" {
		errs = append(errs, fmt.Errorf("--database-url: a PostgreSQL connection string is required (or %s)", EnvDatabaseURL))
	}
	if o.Topology.Replicas < 0 || o.Topology.Replicas > 5 {
		errs = append(errs, fmt.Errorf("--stream-replicas: %d is not from 1 to 5 (0 means 1)", o.Topology.Replicas))
	}
	if o.Role == Hub {
		errs = append(errs, o.Retention.validate(o.Topology))
	}
	if o.HandlerTimeout < 0 || o.StatementTimeout < 0 || o.RetryBase < 0 || o.RetryMax < 0 {
		errs = append(errs, errors.New("--handler-timeout and --statement-timeout must not be negative (0 means the default)"))
	}
	if o.OutboxMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("--outbox-max-bytes: %d is negative (0 means the server's max_payload)", o.OutboxMaxBytes))
	}
	switch o.LogFormat {
	case "", "json", "text":
	default:
		errs = append(errs, fmt.Errorf("--log-format: %q is not json or text", o.LogFormat))
	}
	if _, err := o.level(); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	if o.HealthAddr != "" {
		if _, port, err := net.SplitHostPort(o.HealthAddr); err != nil {
			errs = append(errs, fmt.Errorf("--health-addr: %w", err))
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			errs = append(errs, fmt.Errorf("--health-addr: port %q is not a number from 0 to 65535", port))
		}
	}
	return errors.Join(errs...)
}

func (o *Options) level() (slog.Level, error) {
	var l slog.Level
	if o.LogLevel == "" {
		return slog.LevelInfo, nil
	}
	err := l.UnmarshalText([]byte(o.LogLevel))
	return l, err
}

// NewLogger is a logger on stderr in the options' format and level.
func (o *Options) NewLogger() *slog.Logger {
	l, _ := o.level()
	h := &slog.HandlerOptions{Level: l}
	if o.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, h))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, h))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

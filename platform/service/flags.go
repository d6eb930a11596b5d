package service

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/migrations"
)

// Flags are the command-line settings every hub service takes, with defaults
// from the environment.
type Flags struct {
	NATSURL        string
	DatabaseURL    string
	HealthAddr     string
	StreamReplicas int
	MigrateOnly    bool
	LogFormat      string
}

// Register adds the flags to fs; healthAddr is the service's default
// health address.
func (f *Flags) Register(fs *flag.FlagSet, healthAddr string) {
	fs.StringVar(&f.NATSURL, "nats", envOr("FLOTILLA_NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL (env FLOTILLA_NATS_URL)")
	fs.StringVar(&f.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL connection string (env DATABASE_URL)")
	fs.StringVar(&f.HealthAddr, "health-addr", healthAddr, "address of /healthz and /readyz (empty: off)")
	replicas, _ := strconv.Atoi(os.Getenv("FLOTILLA_STREAM_REPLICAS"))
	fs.IntVar(&f.StreamReplicas, "stream-replicas", replicas, "replicas of the JetStream streams (3 on a 3-node NATS cluster; default 1; env FLOTILLA_STREAM_REPLICAS)")
	fs.BoolVar(&f.MigrateOnly, "migrate-only", false, "apply the database migrations and exit")
	fs.StringVar(&f.LogFormat, "log-format", envOr("FLOTILLA_LOG_FORMAT", "json"), "log format: json or text")
}

// Logger is the service's logger in the chosen format.
func (f *Flags) Logger() *slog.Logger {
	if f.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, nil))
}

// Migrate applies the migrations to the database and returns, for
// --migrate-only (a one-shot step before the services start).
func Migrate(ctx context.Context, databaseURL string) error {
	if databaseURL == "" {
		return fmt.Errorf("migrate: a database URL is required (--database-url or DATABASE_URL)")
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer pool.Close()
	return migrations.MigratePool(ctx, pool)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

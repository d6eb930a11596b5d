// Package migrations holds Flotilla's PostgreSQL schema as numbered SQL files and applies them.
//
// Services call Migrate (or MigratePool) at start. tern takes a PostgreSQL advisory lock for the
// whole run, so any number of replicas may start at once: one migrates, the others wait and then
// find nothing to do. Applied versions are recorded in public.flotilla_schema_version.
//
// Migration files are named NNN_description.sql and are never edited once released; a schema
// change is a new file.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

// VersionTable records the schema version applied to a database.
const VersionTable = "public.flotilla_schema_version"

//go:embed *.sql
var files embed.FS

// Files returns the embedded migration files, for tools that want to show or copy them.
func Files() fs.FS { return files }

// Migrate brings the database behind conn up to the newest schema. Running it on an up-to-date
// database changes nothing.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return fmt.Errorf("migrate: prepare %s: %w", VersionTable, err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return fmt.Errorf("migrate: load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// MigratePool runs Migrate on a connection acquired from pool.
func MigratePool(ctx context.Context, pool *pgxpool.Pool) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer c.Release()
	return Migrate(ctx, c.Conn())
}

// Version reports the schema version the database behind conn is at (0 before any migration)
// and the newest version this package holds.
func Version(ctx context.Context, conn *pgx.Conn) (current, latest int32, err error) {
	names, err := migrate.FindMigrations(files)
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: list migrations: %w", err)
	}
	latest = int32(len(names))
	var exists bool
	if err := conn.QueryRow(ctx, "select to_regclass($1) is not null", VersionTable).Scan(&exists); err != nil {
		return 0, latest, fmt.Errorf("schema version: %w", err)
	}
	if !exists {
		return 0, latest, nil
	}
	if err := conn.QueryRow(ctx, "select version from "+VersionTable).Scan(&current); err != nil {
		return 0, latest, fmt.Errorf("schema version: %w", err)
	}
	return current, latest, nil
}

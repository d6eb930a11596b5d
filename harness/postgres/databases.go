package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DatabaseURL is the URL of database name on this server.
func (s *Server) DatabaseURL(name string) string { return withDatabase(s.adminURL, name) }

// CreateTemplate creates the template database name once per Server and runs migrate on it.
// NewDatabase(ctx, name) then clones it. Calling it again with the same name does nothing.
func (s *Server) CreateTemplate(ctx context.Context, name string, migrate func(context.Context, *pgx.Conn) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("create template: server stopped")
	}
	if _, ok := s.templates[name]; ok {
		return nil
	}
	db := s.prefix + sanitize(name)
	if _, err := s.admin.Exec(ctx, "create database "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("create template %s: %w", name, err)
	}
	if s.external {
		s.databases = append(s.databases, db)
	}
	conn, err := pgx.Connect(ctx, withDatabase(s.adminURL, db))
	if err != nil {
		return fmt.Errorf("create template %s: connect: %w", name, err)
	}
	if migrate != nil {
		if err := migrate(ctx, conn); err != nil {
			conn.Close(ctx)
			return fmt.Errorf("create template %s: %w", name, err)
		}
	}
	if err := conn.Close(ctx); err != nil {
		return fmt.Errorf("create template %s: close: %w", name, err)
	}
	// No connections to a template: CREATE DATABASE ... TEMPLATE fails while anyone is connected.
	if _, err := s.admin.Exec(ctx, "alter database "+pgx.Identifier{db}.Sanitize()+" with is_template true allow_connections false"); err != nil {
		return fmt.Errorf("create template %s: %w", name, err)
	}
	s.templates[name] = db
	return nil
}

// NewDatabase creates a fresh database cloned from a template made by CreateTemplate and returns
// its URL. An empty template gives an empty database.
func (s *Server) NewDatabase(ctx context.Context, template string) (string, error) {
	s.mu.Lock()
	tpl, ok := s.templates[template]
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return "", errors.New("new database: server stopped")
	}
	if template != "" && !ok {
		return "", fmt.Errorf("new database: no template %q (call CreateTemplate first)", template)
	}
	n := s.seq.Add(1)
	db := fmt.Sprintf("%sdb_%d", s.prefix, n)
	if template != "" {
		db = fmt.Sprintf("%s%s_%d", s.prefix, sanitize(template), n)
	}
	stmt := "create database " + pgx.Identifier{db}.Sanitize()
	if tpl != "" {
		stmt += " template " + pgx.Identifier{tpl}.Sanitize()
	}
	if _, err := s.admin.Exec(ctx, stmt); err != nil {
		return "", fmt.Errorf("new database from %q: %w", template, err)
	}
	if s.external {
		s.mu.Lock()
		s.databases = append(s.databases, db)
		s.mu.Unlock()
	}
	return withDatabase(s.adminURL, db), nil
}

// EnsureDatabase creates the database name unless it exists, and returns its URL. Unlike
// NewDatabase's, the database is the caller's to keep: Stop never drops it.
func (s *Server) EnsureDatabase(ctx context.Context, name string) (string, error) {
	var exists bool
	if err := s.admin.QueryRow(ctx, "select exists (select 1 from pg_database where datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("ensure database %s: %w", name, err)
	}
	if !exists {
		_, err := s.admin.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize())
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // duplicate_database: created meanwhile
			return "", fmt.Errorf("ensure database %s: %w", name, err)
		}
	}
	return s.DatabaseURL(name), nil
}

// DropDatabase drops a database made by NewDatabase, disconnecting anyone still connected.
func (s *Server) DropDatabase(ctx context.Context, dbURL string) error {
	name, err := databaseName(dbURL)
	if err != nil {
		return err
	}
	if _, err := s.admin.Exec(ctx, "drop database if exists "+pgx.Identifier{name}.Sanitize()+" with (force)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	s.mu.Lock()
	s.databases = slices.DeleteFunc(s.databases, func(d string) bool { return d == name })
	s.mu.Unlock()
	return nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

func sanitize(name string) string {
	return unsafeName.ReplaceAllString(strings.ToLower(name), "_")
}

// withDatabase returns dsn with its database replaced by db. It understands both URLs and
// keyword/value strings.
func withDatabase(dsn, db string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		q := u.Query()
		q.Del("dbname")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " dbname=" + db
}

func databaseName(dsn string) (string, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("parse database url: %w", err)
	}
	return cfg.Database, nil
}

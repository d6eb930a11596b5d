package migrations_test

import (
	"encoding/base64"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/tern/v2/migrate"

	"github.com/flotilla-dev/flotilla/migrations"
)

// sequenceOf is the sequence number of the migration file whose name ends with suffix.
func sequenceOf(t *testing.T, suffix string) int32 {
	t.Helper()
	names, err := fs.Glob(migrations.Files(), "*"+suffix)
	if err != nil || len(names) != 1 {
		t.Fatalf("migration *%s: %v %v", suffix, names, err)
	}
	n, err := strconv.Atoi(strings.SplitN(names[0], "_", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// Secret values earlier versions left in plain text, in the audit log and in published
// work in the outbox, are gone after the migration; the rest of the rows stays.
func TestSecretsLeftInPlainTextAreRedacted(t *testing.T) {
	t.Parallel()
	conn := connect(t, emptyDB(t))
	m, err := migrate.NewMigrator(t.Context(), conn, migrations.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrations.Files()); err != nil {
		t.Fatal(err)
	}
	seq := sequenceOf(t, "_secrets_redacted.sql")
	if err := m.MigrateTo(t.Context(), seq-1); err != nil {
		t.Fatal(err)
	}
	const value = "migration-s3cret"
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"stringData\":{\"k\":\"` + value + `\"}}","team":"a"}},"data":{"password":"` + b64 + `"},"stringData":{"token":"` + value + `"}}`
	_, err = conn.Exec(t.Context(), `
		insert into audit_log (event_id, type, source, subject, time, payload) values
			('hub-1', 'io.flotilla.hubresource.upserted.v1', 'fleetctl', 'db', now(), $1),
			('env-1', 'io.flotilla.hubresource.upserted.v1', 'fleetctl', 'env', now(),
			 jsonb_build_object('manifest', jsonb_build_object('apiVersion', 'placement.kubernetes-fleet.io/v1beta1', 'kind', 'ResourceEnvelope',
				'metadata', '{"name":"env","namespace":"app"}'::jsonb, 'data', jsonb_build_object('db.yaml', $1::jsonb->'manifest')))),
			('report-1', 'io.flotilla.work.reported.v1', 'apply', 'm1', now(),
			 '{"manifests":[{"resource":{"version":"v1","kind":"Secret","name":"db"},"drifts":[{"path":"/data/password","valueInHub":"`+b64+`","valueInMember":"x"},{"path":"/metadata/labels/a","valueInHub":"kept"}]}]}'),
			('cm-1', 'io.flotilla.hubresource.upserted.v1', 'fleetctl', 'cm', now(), '{"manifest":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"k":"plain"}}}')`,
		`{"manifest":`+secret+`}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(t.Context(), `
		insert into outbox (event_id, subject, type, payload, published_at) values
			('work-1', 'flotilla.work.m1.p', 'io.flotilla.work.desired.v1', convert_to('{"manifests":[' || $1 || ']}', 'UTF8'), now()),
			('work-2', 'flotilla.work.m1.q', 'io.flotilla.work.desired.v1', convert_to('{"manifests":[' || $1 || ']}', 'UTF8'), null)`,
		secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(t.Context(), seq); err != nil {
		t.Fatal(err)
	}
	var audit, outbox string
	if err := conn.QueryRow(t.Context(), `select string_agg(payload::text, E'\n' order by event_id) from audit_log`).Scan(&audit); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), `select string_agg(convert_from(payload, 'UTF8'), E'\n' order by event_id) from outbox where published_at is not null`).Scan(&outbox); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{value, b64} {
		if strings.Contains(audit, s) || strings.Contains(outbox, s) {
			t.Errorf("%q is still stored:\naudit_log:\n%s\noutbox (published):\n%s", s, audit, outbox)
		}
	}
	for _, kept := range []string{`"team": "a"`, `"plain"`, `"kept"`, `"password": "(redacted)"`, `"valueInMember": "(redacted)"`} {
		if !strings.Contains(audit, kept) {
			t.Errorf("audit_log lost %s:\n%s", kept, audit)
		}
	}
	var pending int
	if err := conn.QueryRow(t.Context(), `select count(*) from outbox where published_at is null and octet_length(payload) > 0`).Scan(&pending); err != nil || pending != 1 {
		t.Errorf("unpublished work rows with their payload: %d (%v), want 1: it must still be sent", pending, err)
	}
}

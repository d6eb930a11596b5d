package postgres_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/harness/certs"
	"github.com/flotilla-dev/flotilla/harness/postgres"
)

// A server started with TLS is reached with sslmode=verify-full (its certificate checked
// against the CA and the host name), and refuses plain text; a client holding another CA
// refuses the server.
func TestTLSServerIsVerifiedAndRefusesPlainText(t *testing.T) {
	t.Parallel()
	set, err := certs.WriteSet(t.TempDir(), "flotilla")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := postgres.Start(t.Context(), postgres.Options{
		TLS: &postgres.TLS{CertFile: set.Server.Cert, KeyFile: set.Server.Key, RootCert: set.CA},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	if q := query(t, srv.URL()); q.Get("sslmode") != "verify-full" || q.Get("sslrootcert") != set.CA {
		t.Errorf("URL %s: want sslmode=verify-full and the CA as sslrootcert", srv.URL())
	}
	dbURL, err := srv.EnsureDatabase(t.Context(), "flotilla")
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dbURL)
	var ssl bool
	var version string
	if err := conn.QueryRow(t.Context(), `select ssl, version from pg_stat_ssl where pid = pg_backend_pid()`).Scan(&ssl, &version); err != nil {
		t.Fatal(err)
	}
	if !ssl {
		t.Fatal("the connection is not encrypted")
	}
	t.Logf("connected with sslmode=verify-full over %s", version)

	other, err := certs.WriteSet(t.TempDir(), "stranger")
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]url.Values{
		"another CA":  {"sslmode": {"verify-full"}, "sslrootcert": {other.CA}},
		"plain text":  {"sslmode": {"disable"}},
		"no CA given": {"sslmode": {"verify-full"}, "sslrootcert": {""}},
	} {
		t.Run(name, func(t *testing.T) {
			u := withQuery(t, dbURL, change)
			c, err := pgx.Connect(t.Context(), u)
			if err == nil {
				c.Close(t.Context())
				t.Fatalf("connected with %s", u)
			}
			if !strings.Contains(err.Error(), "certificate") && !strings.Contains(err.Error(), "no encryption") {
				t.Errorf("refused for another reason than TLS: %v", err)
			}
		})
	}
}

func query(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

func withQuery(t *testing.T, raw string, change url.Values) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range change {
		if v[0] == "" {
			q.Del(k)
		} else {
			q[k] = v
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

package rollout_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/sealing"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

func secretManifest(namespace, name, value string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":%q,"namespace":%q},"type":"Opaque",
		"data":{"password":%q},"stringData":{"token":%q}}`, name, namespace, base64.StdEncoding.EncodeToString([]byte(value)), value+"-token")
}

// keyFile writes a key file holding keys named names, the first sealing, and returns its
// path. Calling it again with a name it made before keeps that key.
type keyFiles struct {
	dir   string
	lines map[string]string
}

func (k *keyFiles) write(t *testing.T, names ...string) string {
	t.Helper()
	var file strings.Builder
	for _, n := range names {
		if k.lines[n] == "" {
			line, err := sealing.NewKeyLine(n)
			if err != nil {
				t.Fatal(err)
			}
			k.lines[n] = line
		}
		file.WriteString(k.lines[n])
	}
	path := filepath.Join(k.dir, strings.Join(names, "-"))
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSecretIn fails the test if a value appears anywhere in the database, base64 or not.
func (f *fixture) noSecretIn(values ...string) {
	f.t.Helper()
	var needles []string
	for _, v := range values {
		needles = append(needles, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	relations, found, err := postgres.Search(f.t.Context(), f.Pool, needles...)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(relations) < 10 {
		f.t.Fatalf("searched only %v", relations)
	}
	for _, x := range found {
		f.t.Errorf("a Secret value is stored: %s", x)
	}
}

// blob is the manifests a work event names, as the member's worker fetches them.
func (f *fixture) blob(w events.WorkDesired) string {
	f.t.Helper()
	if w.ManifestsRef == nil || len(w.Manifests) != 0 {
		f.t.Fatalf("work %d carries its manifests inline: a Secret's values would stay in the outbox", w.ResourceIndex)
	}
	data, err := bus.GetBlob(f.t.Context(), f.NC, bus.StreamWorkBlobs, *w.ManifestsRef, 10*time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

// sealedWith is the key each stored Secret (hub store and snapshots) is sealed with.
func (f *fixture) sealedWith() []string {
	f.t.Helper()
	rows, err := f.Pool.Query(f.t.Context(), `
		select m->>'flotilla.io/sealed' from hub_resources, jsonb_array_elements(jsonb_build_array(manifest)) m where m->>'kind' = 'Secret'
		union all
		select m->>'flotilla.io/sealed' from resource_snapshots, jsonb_array_elements(manifests) m where m->>'kind' = 'Secret'`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var sealed *string
		if err := rows.Scan(&sealed); err != nil {
			f.t.Fatal(err)
		}
		name := "(plain text)"
		if sealed != nil {
			name, _ = sealing.SealedWith(*sealed)
		}
		keys = append(keys, name)
	}
	return keys
}

// Secrets are sealed in the hub store and the snapshots, and reach the member's worker only
// as a blob on the bus; no table or view holds their values. A key put first in the key file
// reseals them when the rollout starts, after which the old key may go.
func TestSecretsAreSealedAtRestAndRotate(t *testing.T) {
	t.Parallel()
	keys := &keyFiles{dir: t.TempDir(), lines: map[string]string{}}
	f := newFixture(t, rollout.Config{EncryptionKeyFile: keys.write(t, "k1")})
	stop := f.start()
	f.hub(namespaceManifest("vault"), secretManifest("vault", "db", "first-s3cret"))
	f.place(crp("vault", namespace("vault")))
	f.schedule("vault", 1, []string{"m1"}, nil)
	w := f.waitWork("m1", "vault", 0)
	if got := f.blob(w); !strings.Contains(got, base64.StdEncoding.EncodeToString([]byte("first-s3cret"))) || !strings.Contains(got, "first-s3cret-token") {
		t.Errorf("the worker's manifests do not hold the Secret's values: %s", got)
	}
	f.noSecretIn("first-s3cret")
	if got := f.sealedWith(); strings.Join(got, ",") != "k1,k1" {
		t.Errorf("Secrets stored sealed with %v, want k1 in the hub store and the snapshot", got)
	}
	// The same Secret again: sealed anew, but the same content, so no new snapshot.
	f.hub(secretManifest("vault", "db", "first-s3cret"), configMap("vault", "marker", "1"))
	w = f.waitWork("m1", "vault", 1)
	if got := f.blob(w); !strings.Contains(got, `"marker"`) {
		t.Errorf("snapshot 1 lacks the ConfigMap that made it: %s", got)
	}

	stop()
	f.cfg.EncryptionKeyFile = keys.write(t, "k2", "k1")
	stop = f.start()
	poll.Until(t, patience, "the stored Secrets resealed with k2", func() error {
		if got := f.sealedWith(); strings.Join(got, ",") != "k2,k2,k2" {
			return fmt.Errorf("sealed with %v", got)
		}
		return nil
	})
	stop()
	f.cfg.EncryptionKeyFile = keys.write(t, "k2")
	f.start()
	f.hub(secretManifest("vault", "db", "second-s3cret"))
	w = f.waitWork("m1", "vault", 2)
	if got := f.blob(w); !strings.Contains(got, "second-s3cret-token") || !strings.Contains(got, `"marker"`) {
		t.Errorf("after the rotation the worker's manifests are %s", got)
	}
	f.noSecretIn("first-s3cret", "second-s3cret")
}

// Without a key the rollout refuses a Secret: it is dead-lettered with a reason saying what
// to configure, and stored nowhere. Other objects are placed as before.
func TestSecretsWithoutAKeyAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("vault"), secretManifest("vault", "db", "unkeyed-s3cret"), configMap("vault", "plain", "v"))
	f.place(crp("vault", namespace("vault")))
	f.schedule("vault", 1, []string{"m1"}, nil)
	w := f.waitWork("m1", "vault", 0)
	if len(w.Manifests) != 2 {
		t.Errorf("work holds %d manifests, want the namespace and the ConfigMap", len(w.Manifests))
	}
	var reason string
	poll.Until(t, patience, "the Secret dead-lettered", func() error {
		s, err := f.JS.Stream(t.Context(), bus.StreamDeadLetter)
		if err != nil {
			return err
		}
		msg, err := s.GetLastMsgForSubject(t.Context(), bus.DeadLetterSubject(bus.ConsumerRollout))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return errors.New("no dead letter yet")
		}
		if err != nil {
			return err
		}
		reason = msg.Header.Get(bus.HeaderDeadLetterReason)
		return nil
	})
	if !strings.Contains(reason, "--encryption-key-file") || !strings.Contains(reason, "vault/db") {
		t.Errorf("dead-letter reason %q: want the object and the flag to give", reason)
	}
	f.noSecretIn("unkeyed-s3cret")
	var raw json.RawMessage
	if err := f.Pool.QueryRow(t.Context(), `select coalesce(jsonb_agg(name), '[]') from hub_resources where kind = 'Secret'`).Scan(&raw); err != nil || string(raw) != "[]" {
		t.Errorf("Secrets in the hub store: %s %v", raw, err)
	}
}

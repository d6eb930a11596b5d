package containers_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/harness/containers"
	"github.com/flotilla-dev/flotilla/migrations"
)

func TestPostgresContainerTakesTheSchema(t *testing.T) {
	url := containers.PostgresT(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if err := migrations.Migrate(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `insert into inbox (consumer, event_id) values ('c', 'e')`); err != nil {
		t.Fatal(err)
	}
}

func TestNATSContainerHasJetStream(t *testing.T) {
	url := containers.NATST(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Fatalf("JetStream not enabled in the container: %v", err)
	}
}

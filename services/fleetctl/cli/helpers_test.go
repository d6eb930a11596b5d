package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// unreachable is a NATS URL nothing listens on: commands that must fail
// before connecting are run against it.
const unreachable = "nats://127.0.0.1:1"

var testNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// result is what one fleetctl run printed and returned.
type result struct {
	out, err string
	e        error
}

// combined is the terminal as the user sees it: stderr, then the error that
// main prints.
func (r result) combined() string {
	s := r.err
	if r.e != nil {
		s += "error: " + r.e.Error() + "\n"
	}
	return s
}

// fleetctl runs the command line args with stdin in.
func fleetctl(t *testing.T, in string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), args, Options{
		In: strings.NewReader(in), Out: &out, Err: &errOut,
		Getenv: func(string) string { return "" },
		Now:    func() time.Time { return testNow },
	})
	return result{out: out.String(), err: errOut.String(), e: err}
}

// storedEvents returns every event on the EVENTS stream, oldest first, with
// the subject it was stored on.
func storedEvents(t *testing.T, js jetstream.JetStream) []stored {
	t.Helper()
	ctx := t.Context()
	stream, err := js.Stream(ctx, bus.StreamEvents)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []stored
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		ev, err := bus.Decode(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
		if err != nil {
			t.Fatalf("message %d is not a CloudEvent: %v", seq, err)
		}
		if err := events.Validate(ev); err != nil {
			t.Errorf("message %d on %s is not a valid event: %v", seq, m.Subject, err)
		}
		out = append(out, stored{Subject: m.Subject, Event: ev})
	}
	return out
}

type stored struct {
	Subject string
	Event   cloudevents.Event
}

func (s stored) String() string { return s.Event.Type() + " on " + s.Subject }

func payload[T any](t *testing.T, s stored) *T {
	t.Helper()
	p, err := events.DecodeAs[T](s.Event)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return p
}

// fakeStatus answers the query contract of events/query.go from fixed data:
// a fake of Flotilla's own status service, for testing the client side.
type fakeStatus struct {
	mu         sync.Mutex
	placements map[string]api.ClusterResourcePlacement
	members    map[string]api.MemberCluster
	history    map[string]events.PlacementHistory
	takeovers  []events.TakeoverRecord
	queries    []events.TakeoverQuery
}

func startFakeStatus(t *testing.T, nc *nats.Conn) *fakeStatus {
	t.Helper()
	f := &fakeStatus{placements: map[string]api.ClusterResourcePlacement{}, members: map[string]api.MemberCluster{}, history: map[string]events.PlacementHistory{}}
	svc, err := micro.AddService(nc, micro.Config{Name: events.QueryService, Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	add := func(endpoint string, h func(micro.Request)) {
		name := strings.ReplaceAll(endpoint, ".", "-")
		if err := svc.AddEndpoint(name, micro.HandlerFunc(h), micro.WithEndpointSubject(events.QuerySubjectPrefix+endpoint)); err != nil {
			t.Fatal(err)
		}
	}
	add(events.QueryGetPlacement, serveGet(f, func() map[string]api.ClusterResourcePlacement { return f.placements }, "clusterresourceplacement "))
	add(events.QueryListPlacements, serveList(f, func() map[string]api.ClusterResourcePlacement { return f.placements },
		func(p api.ClusterResourcePlacement) map[string]string { return p.Labels }))
	add(events.QueryGetMember, serveGet(f, func() map[string]api.MemberCluster { return f.members }, "membercluster "))
	add(events.QueryListMembers, serveList(f, func() map[string]api.MemberCluster { return f.members },
		func(m api.MemberCluster) map[string]string { return m.Labels }))
	add(events.QueryHistory, serveGet(f, func() map[string]events.PlacementHistory { return f.history }, "placement "))
	add(events.QueryTakeovers, func(r micro.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var q events.TakeoverQuery
		_ = json.Unmarshal(r.Data(), &q)
		f.queries = append(f.queries, q)
		var out []events.TakeoverRecord
		for _, rec := range f.takeovers {
			if q.Placement == "" || rec.Placement == q.Placement {
				out = append(out, rec)
			}
		}
		respond(r, out, true, "")
	})
	return f
}

func (f *fakeStatus) setPlacement(p api.ClusterResourcePlacement) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.placements[p.Name] = p
}

func respond[T any](r micro.Request, v T, found bool, what string) {
	if !found {
		msg := what + " not found"
		_ = r.Error("404", msg, mustJSON(events.QueryReply[T]{Error: msg, NotFound: true}))
		return
	}
	_ = r.Respond(mustJSON(events.QueryReply[T]{Result: v}))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("test data does not encode: %v", err))
	}
	return b
}

// withTimeout is a context for setup calls of a test.
func withTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func natsConnect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// serveGet answers a get query from the map objects returns, under f's lock.
func serveGet[T any](f *fakeStatus, objects func() map[string]T, what string) func(micro.Request) {
	return func(r micro.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var q events.NameQuery
		_ = json.Unmarshal(r.Data(), &q)
		obj, ok := objects()[q.Name]
		respond(r, obj, ok, what+q.Name)
	}
}

// serveList answers a list query, filtering by the query's label selector.
func serveList[T any](f *fakeStatus, objects func() map[string]T, labelsOf func(T) map[string]string) func(micro.Request) {
	return func(r micro.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var q events.ListQuery
		_ = json.Unmarshal(r.Data(), &q)
		sel, err := labels.Parse(q.LabelSelector)
		if err != nil {
			_ = r.Error("400", err.Error(), mustJSON(events.QueryReply[any]{Error: err.Error()}))
			return
		}
		all := objects()
		out := []T{}
		for _, n := range slices.Sorted(maps.Keys(all)) {
			if sel.Matches(labels.Set(labelsOf(all[n]))) {
				out = append(out, all[n])
			}
		}
		respond(r, out, true, "")
	}
}

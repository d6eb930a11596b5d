package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// natsOptions parses the rendered NATS configuration with the NATS server's own parser, with
// the environment the NATS pods get: the rendered Secret flotilla-nats-users and POD_NAME.
func natsOptions(t *testing.T, r rendered) *server.Options {
	t.Helper()
	dir := t.TempDir()
	for name, content := range r.configMap(t, "nats-config").Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mountNATSTLS(t, r, dir)
	for key, value := range r.secret(t, "flotilla-nats-users").Data {
		t.Setenv(key, string(value))
	}
	t.Setenv("POD_NAME", "nats-0")
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("the rendered NATS configuration does not parse: %v", err)
	}
	return opts
}

// natsPermissions are the configured users' permissions, by user name.
func natsPermissions(t *testing.T, r rendered) map[string]*server.Permissions {
	t.Helper()
	out := map[string]*server.Permissions{}
	for _, u := range natsOptions(t, r).Users {
		out[u.Username] = u.Permissions
	}
	return out
}

// confinement lists, for member's apply worker, subjects it must be able to use for its work
// and subjects it must not: other members', the control plane's, and stream administration.
type confinement struct {
	pubAllow, pubDeny, subAllow, subDeny []string
	// pubDenyDestructive would change the server's state if a wrong configuration allowed them,
	// so only the parsed permissions are checked for them, not the live server.
	pubDenyDestructive []string
}

func confinementOf(member string, others []string) confinement {
	tok := func(name string) string { return strings.ReplaceAll(name, ".", "_") } // bus.SubjectToken
	m := tok(member)
	c := confinement{
		pubAllow: []string{
			"flotilla.workstatus." + m + ".web",
			"flotilla.member." + m + ".heartbeat",
			"flotilla.deadletter.apply-" + m,
			"flotilla.work." + m + ".web.removed", // a tombstone it carried out
			// The unfiltered form stays while events/bus creates the durable with
			// FilterSubjects, which nats.go sends without the filter in the subject.
			"$JS.API.CONSUMER.CREATE.WORK.apply-" + m + ".flotilla.work." + m + ".>",
			"$JS.API.CONSUMER.INFO.WORK.apply-" + m,
			"$JS.API.CONSUMER.MSG.NEXT.WORK.apply-" + m,
			"$JS.ACK.WORK.apply-" + m + ".1.7.3.1767225600000000000.0",
			"$JS.API.CONSUMER.CREATE.WORK.replay-" + m + ".flotilla.work." + m + ".>",
			"$JS.API.CONSUMER.INFO.WORK.replay-" + m,
			"$JS.API.CONSUMER.MSG.NEXT.WORK.replay-" + m,
			"$JS.API.CONSUMER.DELETE.WORK.replay-" + m,
			"$JS.API.DIRECT.GET.WORKBLOBS.flotilla.blob.work." + m + ".web." + strings.Repeat("ab", 32) + ".0",
		},
		pubDeny: []string{
			// Both consumers only with the member's filter named in the subject.
			"$JS.API.CONSUMER.CREATE.WORK.apply-" + m,
			"$JS.API.CONSUMER.CREATE.WORK.replay-" + m,
			"$JS.API.CONSUMER.CREATE.WORK.replay-" + m + ".flotilla.work.>",
			"$JS.API.CONSUMER.CREATE.WORK.ephemeral",
			"flotilla.work." + m + ".web", // desired state is the rollout's to write
			"flotilla.member." + m,        // membership (join, update, leave) is the operator's
			"_INBOX." + m + ".reply",      // a reply forged into someone's request
			"flotilla.work." + m + ".web.other",
			"flotilla.placement.web",
			"flotilla.hub.apps.Deployment.default.web",
			"flotilla.scheduling.web",
			"flotilla.rollout.web",
			"flotilla.status.web",
			"$JS.API.STREAM.CREATE.WORK",
			"$JS.API.STREAM.UPDATE.WORK",
			"$JS.API.STREAM.NAMES",
			"$JS.API.STREAM.INFO.WORK",
			"$JS.API.STREAM.MSG.GET.WORK",
			"$JS.API.DIRECT.GET.WORK",
			"$JS.API.DIRECT.GET.WORKBLOBS",
			"$JS.API.DIRECT.GET.HUBBLOBS.flotilla.blob.hub." + strings.Repeat("ab", 32) + ".0",
			"flotilla.blob.work." + m + ".web." + strings.Repeat("ab", 32) + ".0", // blobs are the rollout's to write
			"$JS.API.CONSUMER.CREATE.EVENTS.status",
			"$JS.API.CONSUMER.MSG.NEXT.EVENTS.status",
		},
		pubDenyDestructive: []string{
			"$JS.API.STREAM.PURGE.WORK",
			"$JS.API.STREAM.PURGE.WORKBLOBS",
			"$JS.API.STREAM.DELETE.EVENTS",
			"$JS.API.STREAM.MSG.DELETE.WORK",
			"$JS.API.CONSUMER.DELETE.WORK.apply-" + m,
			"$JS.API.CONSUMER.DELETE.EVENTS.status",
		},
		subAllow: []string{
			"flotilla.work." + m + ".>",
			"flotilla.work." + m + ".web",
			"flotilla.workstatus." + m + ".web",
			"flotilla.member." + m + ".heartbeat",
			"_INBOX.apply-" + m + ".>", // its own inbox (bus.MemberInboxPrefix)
		},
		subDeny: []string{
			">",
			"flotilla.>",
			"flotilla.work.>",
			"flotilla.work.*.web",
			"flotilla.placement.web",
			"$JS.ACK.>",
			// Every inbox but its own: replies to the services, fleetctl and other clients.
			"_INBOX.>",
			"_INBOX.*.>",
			"_INBOX.scheduler.>",
			"_INBOX.status.>",
			"_INBOX.fleetctl.>",
		},
	}
	for _, other := range others {
		o := tok(other)
		c.pubDeny = append(c.pubDeny,
			"flotilla.workstatus."+o+".web",
			"flotilla.member."+o,
			"flotilla.member."+o+".heartbeat",
			"flotilla.deadletter.apply-"+o,
			"flotilla.work."+o+".web.removed",
			"$JS.API.CONSUMER.CREATE.WORK.apply-"+o,
			"$JS.API.CONSUMER.CREATE.WORK.apply-"+o+".flotilla.work."+o+".>",
			"$JS.API.CONSUMER.CREATE.WORK.apply-"+m+".flotilla.work."+o+".>",
			"$JS.API.CONSUMER.CREATE.WORK.replay-"+o+".flotilla.work."+o+".>",
			"$JS.API.CONSUMER.CREATE.WORK.replay-"+m+".flotilla.work."+o+".>",
			"$JS.API.CONSUMER.MSG.NEXT.WORK.replay-"+o,
			"$JS.API.CONSUMER.INFO.WORK.apply-"+o,
			"$JS.API.CONSUMER.MSG.NEXT.WORK.apply-"+o,
			"$JS.API.DIRECT.GET.WORK.flotilla.work."+o+".web",
			"$JS.API.DIRECT.GET.WORKBLOBS.flotilla.blob.work."+o+".web."+strings.Repeat("ab", 32)+".0",
			"$JS.ACK.WORK.apply-"+o+".1.7.3.1767225600000000000.0",
		)
		c.pubDenyDestructive = append(c.pubDenyDestructive,
			"$JS.API.CONSUMER.DELETE.WORK.apply-"+o,
			"$JS.API.CONSUMER.DELETE.WORK.replay-"+o)
		c.subDeny = append(c.subDeny,
			"flotilla.work."+o+".>",
			"flotilla.work."+o+".web",
			"flotilla.workstatus."+o+".web",
			"flotilla.member."+o,
			"flotilla.member."+o+".heartbeat",
			"$JS.ACK.WORK.apply-"+o+".>",
			"_INBOX.apply-"+o+".>",
		)
	}
	return c.with(requestConfinement(member, others))
}

// allowed applies NATS's rule: a subject (or subscription, wildcards and all) is allowed when
// the allow list is absent or covers it, and no deny entry covers it.
func allowed(p *server.SubjectPermission, subject string) bool {
	if p == nil {
		return true
	}
	if p.Allow != nil && !slices.ContainsFunc(p.Allow, func(f string) bool { return server.SubjectMatchesFilter(subject, f) }) {
		return false
	}
	return !slices.ContainsFunc(p.Deny, func(f string) bool { return server.SubjectsCollide(subject, f) })
}

// checkWorkerConfined checks the configured permissions of member's apply worker.
func checkWorkerConfined(t *testing.T, perms map[string]*server.Permissions, member string, others []string) {
	t.Helper()
	user := "apply-" + member
	p, ok := perms[user]
	if !ok {
		t.Errorf("no NATS user %s (users: %v)", user, keys(perms))
		return
	}
	if p == nil || p.Publish == nil || p.Subscribe == nil {
		t.Errorf("user %s may publish or subscribe anywhere: %+v", user, p)
		return
	}
	c := confinementOf(member, others)
	for _, s := range c.pubAllow {
		if !allowed(p.Publish, s) {
			t.Errorf("%s may not publish %s, which its work needs", user, s)
		}
	}
	for _, s := range slices.Concat(c.pubDeny, c.pubDenyDestructive) {
		if allowed(p.Publish, s) {
			t.Errorf("%s may publish %s", user, s)
		}
	}
	for _, s := range c.subAllow {
		if !allowed(p.Subscribe, s) {
			t.Errorf("%s may not subscribe to %s", user, s)
		}
	}
	for _, s := range c.subDeny {
		if allowed(p.Subscribe, s) {
			t.Errorf("%s may subscribe to %s", user, s)
		}
	}
}

func TestNATSPermissionsConfineApplyWorkers(t *testing.T) {
	r := render(t, filepath.Join(repoRoot(t), exampleOverlay))
	members := keys(r.applyWorkers(t))
	if len(members) < 2 {
		t.Fatalf("apply workers for %v: the example shows two members", members)
	}
	perms := natsPermissions(t, r)
	for _, m := range members {
		others := slices.DeleteFunc(slices.Clone(members), func(o string) bool { return o == m })
		checkWorkerConfined(t, perms, m, others)
	}
	if p, ok := perms["flotilla"]; !ok || p != nil {
		t.Errorf("control-plane user flotilla: present %v, permissions %+v; want the whole account", ok, p)
	}
}

// startNATS runs a NATS server from the rendered configuration, standalone (no routes) on a
// free loopback port with JetStream in a temporary directory.
func startNATS(t *testing.T, r rendered) *server.Server {
	t.Helper()
	opts := natsOptions(t, r)
	opts.Cluster = server.ClusterOpts{}
	opts.Routes = nil
	opts.Host = "127.0.0.1"
	opts.Port = server.RANDOM_PORT
	opts.HTTPPort = 0
	opts.PidFile = ""
	opts.StoreDir = t.TempDir()
	opts.NoSigs = true
	opts.NoLog = true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("NATS server from the rendered configuration: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		t.Fatal("NATS server from the rendered configuration is not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// natsURL is the FLOTILLA_NATS_URL a rendered Deployment gives its container, with
// $(FLOTILLA_NATS_PASSWORD) expanded from the rendered Secret as Kubernetes would, and the
// host pointed at the test server.
func natsURL(t *testing.T, r rendered, d appsv1.Deployment, s *server.Server) string {
	t.Helper()
	env := d.Spec.Template.Spec.Containers[0].Env
	var raw, password string
	for _, e := range env {
		switch e.Name {
		case "FLOTILLA_NATS_URL":
			raw = e.Value
		case "FLOTILLA_NATS_PASSWORD":
			ref := e.ValueFrom.SecretKeyRef
			secret := r.secret(t, "flotilla-nats-users")
			if !strings.HasPrefix(ref.Name, "flotilla-nats-users") {
				t.Fatalf("%s: password from Secret %s", d.Name, ref.Name)
			}
			v, ok := secret.Data[ref.Key]
			if !ok {
				t.Fatalf("%s: Secret has no key %s", d.Name, ref.Key)
			}
			password = string(v)
		}
	}
	raw = strings.ReplaceAll(raw, "$(FLOTILLA_NATS_PASSWORD)", password)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: FLOTILLA_NATS_URL: %v", d.Name, err)
	}
	if u.Host != "nats:4222" {
		t.Errorf("%s connects to %s, want the nats Service", d.Name, u.Host)
	}
	u.Host = s.Addr().String()
	return u.String()
}

func connect(t *testing.T, rawURL string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}), exampleClientTLS(t)}, opts...)
	nc, err := nats.Connect(rawURL, opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", userOf(rawURL), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func userOf(rawURL string) string {
	u, _ := url.Parse(rawURL)
	return u.User.Username()
}

// TestNATSConfinesApplyWorkersOnARealServer starts a NATS server from the rendered
// configuration, connects each workload with the URL and password its Deployment gives it,
// and checks that each apply worker can do its work (its own consumer, results, heartbeats,
// dead letters) and nothing on another member's subjects.
func TestNATSConfinesApplyWorkersOnARealServer(t *testing.T) {
	r := render(t, filepath.Join(repoRoot(t), exampleOverlay))
	s := startNATS(t, r)
	ctx := t.Context()

	var scheduler appsv1.Deployment
	for _, d := range r.deployments(t) {
		if d.Name == "scheduler" {
			scheduler = d
		}
	}
	control := connect(t, natsURL(t, r, scheduler, s))
	cjs, err := jetstream.New(control)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(ctx, cjs, bus.TopologyOptions{}); err != nil {
		t.Fatalf("control plane declares the topology: %v", err)
	}

	workers := r.applyWorkers(t)
	members := keys(workers)
	for _, member := range members {
		t.Run(member, func(t *testing.T) {
			others := slices.DeleteFunc(slices.Clone(members), func(o string) bool { return o == member })
			// Replies come back under the worker's own inbox prefix, the only one it may read.
			nc := connect(t, natsURL(t, r, workers[member], s), nats.CustomInboxPrefix(must(bus.MemberInboxPrefix(member))))
			if got := userOf(natsURL(t, r, workers[member], s)); got != "apply-"+member {
				t.Errorf("worker connects as %s", got)
			}
			runWorker(t, ctx, cjs, nc, member)
			answerPreview(t, control, nc, member)
			checkLive(t, nc, confinementOf(member, others))
		})
	}
}

// runWorker does what an apply worker does on the bus, with its own credentials: create its
// consumer, take its work (one good event, one that is not a CloudEvent), publish a result and
// a heartbeat, acknowledge, and dead-letter what it cannot read.
func runWorker(t *testing.T, ctx context.Context, control jetstream.JetStream, nc *nats.Conn, member string) {
	t.Helper()
	// A bound, so that a refused publish fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := bus.EnsureApplyConsumer(ctx, js, member, bus.TopologyOptions{})
	if err != nil {
		t.Fatalf("worker creates its consumer: %v", err)
	}

	work, err := bus.WorkSubject(member, "web")
	if err != nil {
		t.Fatal(err)
	}
	broken, err := bus.WorkSubject(member, "broken")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := control.Publish(ctx, broken, []byte("not a CloudEvent")); err != nil {
		t.Fatal(err)
	}
	desired, err := events.New(events.TypeWorkDesired, "/flotilla/rollout", "web", "work-"+member,
		events.WorkDesired{Cluster: member, Placement: "web", Manifests: []json.RawMessage{namespaceManifest("web", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(control).Publish(ctx, work, desired); err != nil {
		t.Fatal(err)
	}

	// Replay, as a restarted worker rebuilds its desired state: a consumer of its own name
	// whose filter is in the create subject, read without acks, then deleted.
	tok := strings.ReplaceAll(member, ".", "_")
	replay, err := js.CreateConsumer(ctx, bus.StreamWork, jetstream.ConsumerConfig{
		Name:              "replay-" + tok,
		FilterSubject:     bus.SubjectWorkPrefix + tok + ".>",
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		t.Fatalf("worker creates its replay consumer: %v (%v)", err, nc.LastError())
	}
	var replayed []string
	for pending := replay.CachedInfo().NumPending; pending > 0; {
		msg, err := replay.Next()
		if err != nil {
			t.Fatalf("replay: %v (%v)", err, nc.LastError())
		}
		md, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		replayed, pending = append(replayed, msg.Subject()), md.NumPending
	}
	if want := []string{broken, work}; !slices.Equal(replayed, want) {
		t.Errorf("replayed %v, want %v", replayed, want)
	}
	if err := js.DeleteConsumer(ctx, bus.StreamWork, "replay-"+tok); err != nil {
		t.Errorf("worker deletes its replay consumer: %v", err)
	}

	status := must(events.WorkStatusSubject(member, "web"))
	heartbeat := must(events.HeartbeatSubject(member))
	handled := make(chan string, 4)
	consumeCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- bus.Consume(consumeCtx, js, bus.StreamWork, consumer, func(ctx context.Context, ev cloudevents.Event, m bus.Meta) error {
			pub := bus.NewPublisher(js)
			report, err := events.New(events.TypeWorkReported, "/flotilla/apply/"+member, "web", "status-"+ev.ID(),
				events.WorkReported{Cluster: member, Placement: "web", ObservedAt: time.Now().UTC()})
			if err != nil {
				return err
			}
			if _, err := pub.Publish(ctx, status, report); err != nil {
				return fmt.Errorf("publish result: %w", err)
			}
			beat, err := events.New(events.TypeMemberHeartbeat, "/flotilla/apply/"+member, member, "heartbeat-"+ev.ID(),
				events.MemberHeartbeat{Name: member, Healthy: true, ObservedAt: time.Now().UTC()})
			if err != nil {
				return err
			}
			if _, err := pub.Publish(ctx, heartbeat, beat); err != nil {
				return fmt.Errorf("publish heartbeat: %w", err)
			}
			handled <- m.Subject
			return nil
		}, bus.WithValidator(events.Admit), bus.WithDoubleAck(), bus.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	}()
	select {
	case got := <-handled:
		if got != work {
			t.Errorf("worker handled %s, want %s", got, work)
		}
	case err := <-done:
		t.Fatalf("consume stopped before handling the work: %v", err)
	case <-ctx.Done():
		t.Fatalf("the worker never handled its work")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("consume: %v", err)
	}

	for stream, subject := range map[string]string{
		bus.StreamEvents:     status,
		bus.StreamDeadLetter: bus.DeadLetterSubject(consumer),
	} {
		st, err := control.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetLastMsgForSubject(ctx, subject); err != nil {
			t.Errorf("%s has nothing on %s: %v", stream, subject, err)
		}
	}
	st, err := control.Stream(ctx, bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(ctx, heartbeat); err != nil {
		t.Errorf("no heartbeat on %s: %v", heartbeat, err)
	}
	info, err := control.Consumer(ctx, bus.StreamWork, consumer)
	if err != nil {
		t.Fatal(err)
	}
	ci := info.CachedInfo()
	if ci.NumPending != 0 || ci.NumAckPending != 0 {
		t.Errorf("consumer %s: %d pending, %d unacknowledged: the worker's acks did not land", consumer, ci.NumPending, ci.NumAckPending)
	}
}

// checkLive checks each subject of c on the server: a denied publish or subscription makes the
// server send a permissions violation, which the client has recorded by the time a Flush
// (a ping round trip, after the violation) returns.
func checkLive(t *testing.T, nc *nats.Conn, c confinement) {
	t.Helper()
	violation := func(kind, subject string) bool {
		err := nc.LastError()
		return err != nil && strings.Contains(err.Error(), fmt.Sprintf("%s %q", kind, subject))
	}
	for _, subj := range c.pubAllow {
		if err := nc.Publish(subj, nil); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if violation("Publish to", subj) {
			t.Errorf("publish %s refused: %v", subj, nc.LastError())
		}
	}
	for _, subj := range c.pubDeny {
		if err := nc.Publish(subj, nil); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if !violation("Publish to", subj) {
			t.Errorf("publish %s accepted", subj)
		}
	}
	for _, subj := range c.subAllow {
		sub, err := nc.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if violation("Subscription to", subj) {
			t.Errorf("subscription to %s refused", subj)
		}
		_ = sub.Unsubscribe()
	}
	for _, subj := range c.subDeny {
		sub, err := nc.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if !violation("Subscription to", subj) {
			t.Errorf("subscription to %s accepted", subj)
		}
		_ = sub.Unsubscribe()
	}
}

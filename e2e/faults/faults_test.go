package faults

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/harness/poll"
)

// EnvMatrix selects the whole matrix ("full", as make e2e runs it); otherwise the short form
// runs, a subset of the faults with short outages.
const EnvMatrix = "FLOTILLA_FAULTS"

// EnvKeep, set to anything, keeps the stack's logs and data when the suite passes too.
const EnvKeep = "FLOTILLA_FAULTS_KEEP"

// scenario is what the fleet is doing when a fault strikes.
type scenario string

const (
	newPlacement  scenario = "100-object placement"
	rollingUpdate scenario = "rolling update"
)

// moment is when in the scenario the fault strikes.
type moment int

const (
	// atOnce: right after fleetctl apply has published the change.
	atOnce moment = iota
	// midApply: while a member holds some but not all of the change's objects.
	midApply
)

// fault is one row of the matrix.
type fault struct {
	name     string
	scenario scenario
	when     moment
	// short: part of the short form.
	short bool
	// inject causes the fault and returns when the faulty part is back; target is the
	// member the change was reaching when the fault struck.
	inject func(t *testing.T, s *stack, target string)
}

// matrix is the faults of the full matrix, or of the short form.
func matrix(full bool) []fault {
	outage, memberOutage := 20*time.Second, 20*time.Second
	if full {
		outage, memberOutage = 3*time.Minute, 60*time.Second
	}
	all := []fault{
		{name: "kill -9 scheduler", scenario: newPlacement, when: atOnce, inject: killService("scheduler")},
		{name: "kill -9 scheduler", scenario: rollingUpdate, when: midApply, inject: killService("scheduler")},
		{name: "kill -9 rollout", scenario: newPlacement, when: atOnce, inject: killService("rollout")},
		{name: "kill -9 rollout", scenario: rollingUpdate, when: midApply, short: true, inject: killService("rollout")},
		{name: "kill -9 status", scenario: newPlacement, when: midApply, inject: killService("status")},
		{name: "kill -9 status", scenario: rollingUpdate, when: atOnce, inject: killService("status")},
		{name: "kill -9 apply worker", scenario: newPlacement, when: midApply, short: true, inject: killWorker},
		{name: "NATS restart", scenario: newPlacement, when: midApply, short: true, inject: restartNATS},
		{name: "PostgreSQL restart", scenario: rollingUpdate, when: midApply, inject: restartPostgres},
		{name: fmt.Sprintf("PostgreSQL down %s", outage), scenario: newPlacement, when: midApply, inject: postgresDown(outage)},
		{name: fmt.Sprintf("PostgreSQL frozen %s", outage), scenario: rollingUpdate, when: midApply, short: true, inject: postgresFrozen(outage)},
		{name: fmt.Sprintf("member API server down %s", memberOutage), scenario: rollingUpdate, when: midApply, short: true, inject: memberDown(memberOutage)},
	}
	if full {
		return all
	}
	var short []fault
	for _, f := range all {
		if f.short {
			short = append(short, f)
		}
	}
	return short
}

func killService(name string) func(*testing.T, *stack, string) {
	return func(t *testing.T, s *stack, _ string) {
		d := s.services[name]
		d.Kill()
		s.waitReady(t, map[string]*daemon{name: d})
	}
}

func killWorker(t *testing.T, s *stack, member string) {
	d := s.workers[member]
	d.Kill()
	s.waitReady(t, map[string]*daemon{member: d})
}

func restartNATS(t *testing.T, s *stack, _ string) {
	s.nats.Restart()
	s.waitReady(t, map[string]*daemon{"nats": s.nats})
}

func restartPostgres(t *testing.T, s *stack, _ string) {
	s.pgFaultable(t)
	if err := s.pg.Halt(); err != nil {
		t.Fatal(err)
	}
	if err := s.pg.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func postgresDown(d time.Duration) func(*testing.T, *stack, string) {
	return func(t *testing.T, s *stack, _ string) {
		s.pgFaultable(t)
		if err := s.pg.Halt(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := s.pg.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

func postgresFrozen(d time.Duration) func(*testing.T, *stack, string) {
	return func(t *testing.T, s *stack, _ string) {
		s.pgFaultable(t)
		if err := s.pg.Freeze(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := s.pg.Thaw(); err != nil {
			t.Fatal(err)
		}
	}
}

func memberDown(d time.Duration) func(*testing.T, *stack, string) {
	return func(t *testing.T, s *stack, member string) {
		if err := s.kube.StopAPIServer(member); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := s.kube.StartAPIServer(t.Context(), member); err != nil {
			t.Fatal(err)
		}
	}
}

// pgFaultable skips a PostgreSQL fault on a server the suite did not start.
func (s *stack) pgFaultable(t *testing.T) {
	if s.pg.External() {
		t.Skip("PostgreSQL is an external server (FLOTILLA_TEST_DATABASE_URL): the suite cannot stop it")
	}
}

// row is one line of the closing table.
type row struct {
	fault, scenario, injected string
	lasted, converged         time.Duration
	lost, recreated           int
	deadLettered, duplicates  int
	failed                    bool
}

// TestFaults runs the matrix on one stack, one fault at a time, and prints the table.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the services with three member clusters and injects faults for minutes")
	}
	full := os.Getenv(EnvMatrix) == "full"
	s := startStack(t)
	tr, err := startTracker(t.Context(), s.clients)
	if err != nil {
		t.Fatal(err)
	}
	rolling := &placement{name: "rolling", version: 1}
	s.apply(t, rolling.manifests())
	s.waitConverged(t, []placement{*rolling})
	t.Logf("placement %s converged: %d objects on %d members", rolling.name, objectsEach, len(s.members))
	s.controlTracker(t, tr, *rolling)

	c := &campaign{s: s, tr: tr, rolling: rolling}
	for i, f := range matrix(full) {
		t.Run(fmt.Sprintf("%02d %s during %s", i+1, f.name, f.scenario), func(t *testing.T) {
			c.run(t, i+1, f)
		})
	}
	form := "short form (" + EnvMatrix + "=full for the whole matrix)"
	if full {
		form = "full matrix"
	}
	t.Logf("fault table, %s:", form)
	for _, line := range table(c.rows) {
		t.Log("report| " + line)
	}
}

// controlTracker makes sure the tracker would see what the faults must not cause, so that
// the suite cannot pass for want of looking: it knows every object of p on every member,
// and an object a person deletes on a member (which the apply worker puts back) shows as
// deleted and re-created.
func (s *stack) controlTracker(t *testing.T, tr *tracker, p placement) {
	t.Helper()
	if n, want := tr.objects(), objectsEach*len(s.members); n < want {
		t.Fatalf("the tracker knows %d objects, want at least %d", n, want)
	}
	before := tr.changes()
	member := s.members[0]
	if err := s.clients[member].Resource(configMapsGVR).Namespace(p.name).Delete(t.Context(), "config-00", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Every(t, time.Second, patience, "the deleted ConfigMap seen deleted and put back", func() error {
		ch := tr.changes().since(before)
		if len(ch.deleted) != 1 || len(ch.recreated) != 1 {
			return fmt.Errorf("deleted %v, re-created %v", ch.deleted, ch.recreated)
		}
		return nil
	})
	t.Logf("control: a ConfigMap deleted by hand on %s was seen deleted and re-created", member)
}

// campaign is the state the faults share: the stack, the tracker, the placements so far.
type campaign struct {
	s          *stack
	tr         *tracker
	rolling    *placement
	placements []placement
	rows       []row
}

func (c *campaign) all() []placement {
	if c.rolling == nil {
		return c.placements
	}
	return append([]placement{*c.rolling}, c.placements...)
}

// run runs one fault: publish the change, strike when the fault's moment comes, wait for
// everything to converge, and check what was lost, re-created, dead-lettered or done twice.
func (c *campaign) run(t *testing.T, n int, f fault) {
	s := c.s
	r := row{fault: f.name, scenario: string(f.scenario), failed: true}
	defer func() {
		r.failed = t.Failed()
		c.rows = append(c.rows, r)
	}()
	before := c.tr.changes()
	crashesBefore := len(s.crashes())
	deadBefore, err := s.deadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fromSeq, err := s.lastEventSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	var change placement
	if f.scenario == newPlacement {
		change = placement{name: fmt.Sprintf("fault-%02d", n), version: 1}
		c.placements = append(c.placements, change)
	} else {
		c.rolling.version++
		change = *c.rolling
	}
	published := time.Now()
	s.apply(t, change.manifests())
	target, progress := s.members[0], "just published"
	if f.when == midApply {
		target, progress = s.midApply(t, change)
	}
	r.injected = fmt.Sprintf("+%s, %s", time.Since(published).Round(100*time.Millisecond), progress)
	t.Logf("%s at %s", f.name, r.injected)
	struck := time.Now()
	f.inject(t, s, target)
	r.lasted = time.Since(struck)
	t.Logf("%s over after %s", f.name, r.lasted.Round(100*time.Millisecond))

	convergedAt := s.waitConverged(t, c.all())
	r.converged = convergedAt.Sub(struck.Add(r.lasted))
	t.Logf("every placement converged %s after the fault ended (%s after the change)",
		r.converged.Round(100*time.Millisecond), convergedAt.Sub(published).Round(100*time.Millisecond))

	c.check(t, &r, before, crashesBefore, len(deadBefore), fromSeq)
}

// check fills the row's counts and fails the test on any loss or duplicate.
func (c *campaign) check(t *testing.T, r *row, before changes, crashesBefore, deadBefore int, fromSeq uint64) {
	s := c.s
	ch := c.tr.changes().since(before)
	r.lost, r.recreated = len(ch.deleted), len(ch.recreated)
	if r.lost > 0 {
		t.Errorf("%d objects were deleted from members: %s", r.lost, strings.Join(ch.deleted, ", "))
	}
	if r.recreated > 0 {
		t.Errorf("%d objects were re-created on members: %s", r.recreated, strings.Join(ch.recreated, ", "))
	}
	dls, err := s.deadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r.deadLettered = len(dls) - deadBefore
	if r.deadLettered > 0 {
		t.Errorf("%d events were dead-lettered:%s", r.deadLettered, describeDeadLetters(dls[deadBefore:]))
	}
	dups, err := s.duplicateEffects(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for what, n := range dups {
		r.duplicates += n
		t.Errorf("duplicate effects: %d %s", n, what)
	}
	c.checkAudit(t, fromSeq)
	if crashes := s.crashes(); len(crashes) > crashesBefore {
		t.Errorf("processes exited by themselves:\n%s", strings.Join(crashes[crashesBefore:], "\n\n"))
	}
	if reports := s.raceReports(); len(reports) > 0 {
		t.Errorf("data races or panics in the services' logs: %s", strings.Join(reports, "; "))
	}
}

// checkAudit waits until the audit log holds every event the bus took since fromSeq, once
// (audit_log keys its rows by event id, so a second copy of an event cannot add a row).
func (c *campaign) checkAudit(t *testing.T, fromSeq uint64) {
	s := c.s
	to, err := s.lastEventSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ids, copies, err := s.eventIDs(t.Context(), fromSeq+1, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		t.Errorf("the bus took no event from sequence %d on: the audit check would see nothing", fromSeq+1)
	}
	deadline := time.Now().Add(patience)
	for {
		missing, err := s.unaudited(t.Context(), ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of the %d events on the bus are not in the audit log, e.g. %s", len(missing), len(ids), missing[0])
			return
		}
		time.Sleep(time.Second)
	}
	t.Logf("the audit log holds each of the %d events the bus took once (%d second copies on the bus, recorded once)", len(ids), copies)
}

// midApply waits until a member holds some but not all of change's objects and names it; if
// the change reached members too fast to see that, it names the first member still short of
// the change, or says the change was complete.
func (s *stack) midApply(t *testing.T, change placement) (member, progress string) {
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		partial, missing := "", ""
		var held int
		for _, m := range s.members {
			n, err := s.objectsAt(t.Context(), m, change)
			if err != nil {
				continue
			}
			switch {
			case n > 0 && n < objectsEach && partial == "":
				partial, held = m, n
			case n == 0 && missing == "":
				missing = m
			}
		}
		if partial != "" {
			return partial, fmt.Sprintf("%s applying (%d/%d objects)", partial, held, objectsEach)
		}
		if missing == "" {
			return s.members[0], "change complete on every member"
		}
		select {
		case <-t.Context().Done():
			t.FailNow()
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("no member applied %s at %s within %s", change.name, change.versionLabel(), patience)
	return "", ""
}

// table renders the rows as a Markdown table.
func table(rows []row) []string {
	out := []string{
		"| fault | during | injected | fault lasted | converged after it | objects lost | objects re-created | events dead-lettered | duplicate effects |",
		"|---|---|---|---|---|---|---|---|---|",
	}
	for _, r := range rows {
		conv := r.converged.Round(100 * time.Millisecond).String()
		if r.failed {
			conv += " (FAILED)"
		}
		out = append(out, fmt.Sprintf("| %s | %s | %s | %s | %s | %d | %d | %d | %d |",
			r.fault, r.scenario, r.injected, r.lasted.Round(100*time.Millisecond), conv,
			r.lost, r.recreated, r.deadLettered, r.duplicates))
	}
	return out
}

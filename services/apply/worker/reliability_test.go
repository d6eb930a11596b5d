package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/apply/internal/applytest"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

// oneAtATime makes the worker apply one placement at a time, in the order they come.
func oneAtATime(c *worker.Config) { c.Placements = 1 }

// storedReports returns the reports of placement on cluster that the EVENTS stream took,
// oldest first.
func (f *fleet) storedReports(cluster, placement string) []*events.WorkReported {
	f.t.Helper()
	subject, err := events.WorkStatusSubject(cluster, placement)
	if err != nil {
		f.t.Fatal(err)
	}
	cons, err := f.js.OrderedConsumer(f.t.Context(), bus.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*events.WorkReported
	for {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			f.t.Fatal(err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			ev, err := bus.DecodeJetStream(msg)
			if err != nil {
				f.t.Fatal(err)
			}
			r, err := events.DecodeAs[events.WorkReported](ev)
			if err != nil {
				f.t.Fatal(err)
			}
			out = append(out, r)
		}
		if n == 0 {
			return out
		}
	}
}

// refuseReports makes the EVENTS stream stop taking work reports, as when the bus cannot
// store them; the returned func makes it take them again.
func (f *fleet) refuseReports() (restore func()) {
	f.t.Helper()
	s, err := f.js.Stream(f.t.Context(), bus.StreamEvents)
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	refusing := cfg
	refusing.Subjects = slices.DeleteFunc(slices.Clone(cfg.Subjects), func(s string) bool { return s == bus.SubjectsWorkStatus })
	if _, err := f.js.UpdateStream(f.t.Context(), refusing); err != nil {
		f.t.Fatal(err)
	}
	return func() {
		f.t.Helper()
		if _, err := f.js.UpdateStream(f.t.Context(), cfg); err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestReportsWaitForTheBusAndTheNewestWins: while the bus refuses reports, the worker keeps
// trying; a newer state of the placement replaces the report waiting; when the bus takes
// reports again, the newest state is stored and the older one never is.
func TestReportsWaitForTheBusAndTheNewestWins(t *testing.T) {
	f := newFleet(t)
	f.start(member, oneAtATime)
	placement, ns := name(t, "crp"), name(t, "")
	restore := f.refuseReports()

	mark := f.mark()
	f.desire(work(t, member, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "app-config", "1")))
	// Each attempt crosses the bus, so the test sees it, though no stream stores it.
	f.waitReportAfter(mark, member, placement, "the first snapshot tried", func(r *events.WorkReported) bool { return r.ResourceIndex == 1 && applied(r) })
	next := work(t, member, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "app-config", "2"))
	next.ResourceIndex, next.Generation = 2, 2
	f.desire(next)
	f.waitReportAfter(mark, member, placement, "the second snapshot tried", func(r *events.WorkReported) bool { return r.ResourceIndex == 2 && applied(r) })
	if stored := f.storedReports(member, placement); len(stored) != 0 {
		t.Fatalf("%d reports stored while the bus refused them", len(stored))
	}

	restore()
	poll.Every(t, step, timeout, "the newest state stored", func() error {
		stored := f.storedReports(member, placement)
		if len(stored) == 0 || stored[len(stored)-1].ResourceIndex != 2 || !applied(stored[len(stored)-1]) {
			return fmt.Errorf("%d reports stored", len(stored))
		}
		return nil
	})
	for _, r := range f.storedReports(member, placement) {
		if r.ResourceIndex != 2 {
			t.Errorf("a report of the replaced snapshot was stored after the newer one: %s", dump(r))
		}
	}
}

// TestCarriedOutTombstoneIsNotRunAgainAfterRestart: a worker carries out a tombstone and
// records it on the bus; a worker started afterwards on the same member does not carry it
// out again (an object that reappeared with the placement's owner label stays), while a
// tombstone published while no worker ran is carried out.
func TestCarriedOutTombstoneIsNotRunAgainAfterRestart(t *testing.T) {
	f := newFleet(t)
	stop := f.start(member, oneAtATime)
	gone, later, next := name(t, "gone"), name(t, "later"), name(t, "next")
	nsGone, nsLater, nsNext := name(t, "g"), name(t, "l"), name(t, "n")
	f.desire(work(t, member, gone, api.ApplyStrategy{}, nsYAML(nsGone), configMapYAML(nsGone, "c", "1")))
	f.desire(work(t, member, later, api.ApplyStrategy{}, nsYAML(nsLater), configMapYAML(nsLater, "c", "1")))
	f.waitReport(member, gone, "applied", applied)
	f.waitReport(member, later, "applied", applied)

	f.tombstone(member, gone, api.DeleteStrategy{})
	f.waitReport(member, gone, "deleted", func(r *events.WorkReported) bool { return r.Deleted })
	tombSeq := lastSeq(t, f, mustSubject(events.WorkSubject(member, gone)))
	poll.Every(t, step, timeout, "the removal recorded on the bus", func() error {
		m, err := lastMsg(f, mustSubject(events.WorkRemovedSubject(member, gone)))
		if err != nil {
			return err
		}
		ev, err := bus.Decode(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
		if err != nil {
			return err
		}
		rec, err := events.DecodeAs[events.WorkRemoved](ev)
		if err != nil || rec.TombstoneSequence != tombSeq {
			return fmt.Errorf("record %+v (%v), want tombstone %d", rec, err, tombSeq)
		}
		return nil
	})
	stop()

	// An object with the removed placement's owner label: carrying the tombstone out again
	// (a scan of the member) would delete it.
	orphan := applytest.Object(t, configMapYAML("default", name(t, "orphan"), "x"))
	orphan.SetLabels(map[string]string{manifest.ManagedByLabel: manifest.ManagedByValue, manifest.OwnerLabel(gone): manifest.OwnerValue})
	if _, err := client(t, member).Resource(configMaps).Namespace("default").Create(t.Context(), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.tombstone(member, later, api.DeleteStrategy{})

	restarted := f.mark()
	f.start(member, oneAtATime)
	f.desire(work(t, member, next, api.ApplyStrategy{}, nsYAML(nsNext), configMapYAML(nsNext, "c", "1")))
	// One placement at a time, in order: the replayed tombstones come before next.
	f.waitReportAfter(restarted, member, later, "the new tombstone carried out", func(r *events.WorkReported) bool { return r.Deleted })
	f.waitReportAfter(restarted, member, next, "applied after the restart", applied)
	f.mu.Lock()
	for _, r := range f.reports[restarted:] {
		if r.Placement == gone {
			t.Errorf("the carried-out tombstone ran again: %s", dump(r))
		}
	}
	f.mu.Unlock()
	if get(t, member, configMaps, "default", orphan.GetName()) == nil {
		t.Error("the object labelled for the removed placement was deleted: its tombstone ran again")
	}
	poll.Every(t, step, timeout, "the later placement's namespace to go", func() error {
		if u := get(t, member, namespaces, "", nsLater); u != nil && u.GetDeletionTimestamp() == nil {
			return errors.New("the namespace is there and not being deleted")
		}
		return nil
	})
}

func mustSubject(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func lastMsg(f *fleet, subject string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(f.t.Context(), 5*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, bus.StreamWork)
	if err != nil {
		return nil, err
	}
	return s.GetLastMsgForSubject(ctx, subject)
}

func lastSeq(t *testing.T, f *fleet, subject string) uint64 {
	t.Helper()
	m, err := lastMsg(f, subject)
	if err != nil {
		t.Fatal(err)
	}
	return m.Sequence
}

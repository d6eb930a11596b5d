package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/e2e/bench/fleet/sim"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// measurement is what one run measured. Durations of the placement count from the
// fleetctl apply; zero means the step was not reached.
type measurement struct {
	opts  options
	began time.Time
	setUp time.Duration // NATS, PostgreSQL and the services started

	joinsPublished time.Duration // every member joined and sent its first heartbeat
	hubJoined      time.Duration // the status service lists them all joined and healthy

	placed                bool
	scheduled, applied    time.Duration
	available             time.Duration
	firstWork, lastReport time.Duration // seen by the simulated members
	lastStatus            string
	stats                 sim.Stats
	peakRSS, rss          int64 // bytes
	cpuUser, cpuSystem    time.Duration
	goroutines            int
	heapInUse             uint64
	streams               []streamState
	maxPayload            int
	largest, largestEvent wireMsg
	consumers             string // how far the hub services are behind the fleet at the end
	// preview: fleetctl apply --dry-run=server of the placement with changed objects (-preview).
	preview        time.Duration
	previewSummary string
}

type streamState struct {
	name        string
	msgs, bytes uint64
	consumers   int
}

// collect reads the process's and the bus's figures at the end of the run.
func (m *measurement) collect(ctx context.Context, fleet *sim.Fleet, js jetstream.JetStream, w *wire, maxPayload int64) {
	m.stats = fleet.Stats()
	m.peakRSS, m.rss = procStatus("VmHWM"), procStatus("VmRSS")
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		m.cpuUser = time.Duration(ru.Utime.Nano())
		m.cpuSystem = time.Duration(ru.Stime.Nano())
	}
	m.goroutines = runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapInUse = ms.HeapInuse
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, name := range []string{bus.StreamEvents, bus.StreamWork, bus.StreamDeadLetter} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			continue
		}
		info := s.CachedInfo()
		m.streams = append(m.streams, streamState{name: name, msgs: info.State.Msgs, bytes: info.State.Bytes, consumers: info.State.Consumers})
	}
	m.maxPayload = int(maxPayload)
	m.largest, m.largestEvent = w.maxSize()
}

// procStatus reads a size field of this process's /proc status, in bytes; 0 when unknown.
func procStatus(field string) int64 { return procStatusOf(os.Getpid(), field) }

func (m *measurement) print(out io.Writer, w *wire) {
	o := m.opts
	d := func(v time.Duration) string {
		if v == 0 {
			return "not reached"
		}
		return v.Round(time.Millisecond).String()
	}
	fmt.Fprintf(out, "\nfleet benchmark: %d simulated members (%s consumers), heartbeat %s, apply delay %s, failure rate %g, seed %d\n",
		o.members, o.consumers, o.heartbeat, o.applyDelay, o.failureRate, o.seed)
	if o.separate {
		fmt.Fprintf(out, "  availability reported separately, %s after the apply\n", o.availableDelay)
	}
	fmt.Fprintf(out, "  set-up (NATS%s): %s\n", map[bool]string{true: ", PostgreSQL, services", false: ""}[o.hub], d(m.setUp))
	fmt.Fprintf(out, "  join: every member joined + first heartbeat   %s\n", d(m.joinsPublished))
	if o.hub {
		fmt.Fprintf(out, "  join: scheduler and status have taken them in %s\n", d(m.hubJoined))
	}
	if m.placed {
		want := o.pick
		if want == 0 {
			want = o.members
		}
		fmt.Fprintf(out, "  placement %s on %d clusters, %d objects, from fleetctl apply:\n", policyName(o.pick), want, o.objects)
		fmt.Fprintf(out, "    scheduling decision on the bus              %s\n", d(m.scheduled))
		fmt.Fprintf(out, "    first work at a member                      %s\n", d(m.firstWork))
		fmt.Fprintf(out, "    last report published by a member           %s\n", d(m.lastReport))
		fmt.Fprintf(out, "    Applied=True on every cluster (status)      %s\n", d(m.applied))
		fmt.Fprintf(out, "    Available=True on every cluster (status)    %s\n", d(m.available))
		fmt.Fprintf(out, "    last status seen: %s\n", m.lastStatus)
	}
	if o.preview {
		fmt.Fprintf(out, "  preview (fleetctl apply --dry-run=server, the placement with changed objects): %s, %s\n", d(m.preview), m.previewSummary)
	}
	s := m.stats
	fmt.Fprintf(out, "  members sent %d heartbeats and %d reports, took %d desired states and %d tombstones; %d simulated failures, %d publish errors, %d consumers started again\n",
		s.Heartbeats, s.Reports, s.Work, s.Tombstones, s.Failures, s.PublishErrors, s.ConsumerRestarts)
	fmt.Fprintf(out, "  process (NATS server%s and the simulated fleet): peak RSS %s, RSS now %s, Go heap in use %s, %d goroutines, CPU %s user + %s system over %s\n",
		map[bool]string{true: ", hub services", false: ""}[o.hub], bytesString(m.peakRSS), bytesString(m.rss),
		bytesString(int64(m.heapInUse)), m.goroutines, m.cpuUser.Round(100*time.Millisecond), m.cpuSystem.Round(100*time.Millisecond),
		time.Since(m.began).Round(time.Second))
	if m.consumers != "" {
		fmt.Fprintf(out, "  hub consumers at the end, against the last event of the fleet: %s\n", m.consumers)
	}
	for _, st := range m.streams {
		fmt.Fprintf(out, "  stream %-10s %8d messages %10s, %d consumers\n", st.name, st.msgs, bytesString(int64(st.bytes)), st.consumers)
	}
	fmt.Fprintf(out, "  largest message on the wire: %s on %s; largest Flotilla event: %s on %s\n",
		bytesString(int64(m.largest.size)), m.largest.subject, bytesString(int64(m.largestEvent.size)), m.largestEvent.subject)
	w.print(out, m.maxPayload)
}

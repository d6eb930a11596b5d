package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
)

// fleetctl runs `fleetctl args...` in this process against the standalone NATS server, as a
// user's fleetctl would (it opens its own connection).
func (b *bench) fleetctl(ctx context.Context, args ...string) error {
	var out bytes.Buffer
	err := cli.Run(ctx, append([]string{"--nats", b.natsURL}, args...), cli.Options{
		In: strings.NewReader(""), Out: &out, Err: &out,
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		return fmt.Errorf("fleetctl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

// placementRun is one placement's measurements.
type placementRun struct {
	// create: fleetctl apply of the namespace, its objects and the placement.
	create milestones
	// update: fleetctl apply of one edited ConfigMap.
	update milestones
	// createCPU: the CPU the machine's processes used during create.
	createCPU cpuUse
	// createRequests: what the members' API servers were asked during create (-requests).
	createRequests apiCounts
}

// milestones are the moments of one measured change, as offsets from its start.
type milestones map[string]time.Duration

// Milestones, in the order a change passes through them.
const (
	msApplied         = "fleetctl apply returned"
	msPlacementOnBus  = "placement.upserted on the bus"
	msHubOnBus        = "hubresource.upserted on the bus"
	msScheduled       = "placement.scheduled"
	msSnapshot        = "resourcesnapshot.created"
	msWorkSent        = "work.desired to cluster #%d"
	msReported        = "work.reported Applied=True from cluster #%d"
	msMembersDone     = "objects seen on member #%d (watch)"
	msAllMembers      = "all members show the change (watch)"
	msAppliedAll      = "Applied=True on all members (status query)"
	msAppliedAllEvent = "Applied=True on all members (status event)"
)

// runFlotilla places a fresh namespace with a new placement and measures it, then edits one
// ConfigMap on the hub and measures that.
func (b *bench) runFlotilla(ctx context.Context, run, maxUnavailable string) (placementRun, error) {
	name := "bench-" + run
	ns := "bench-flotilla-" + run
	objs := workload(ns, run)
	dir := filepath.Join(b.workDir, "flotilla-"+run)
	if err := writeYAML(filepath.Join(dir, "create", "10-objects.yaml"), documents(objs)...); err != nil {
		return placementRun{}, err
	}
	if err := writeYAML(filepath.Join(dir, "create", "20-placement.yaml"), placement(name, ns, maxUnavailable)); err != nil {
		return placementRun{}, err
	}
	change := edited(objs)
	if err := writeYAML(filepath.Join(dir, "update", change.obj.GetName()+".yaml"), change.obj.Object); err != nil {
		return placementRun{}, err
	}
	keys := make([]objectKey, len(objs))
	for i, o := range objs {
		keys[i] = o.key()
	}

	var res placementRun
	// 1. A new placement of a new namespace with 20 objects.
	req0, err := b.requestsBefore(ctx)
	if err != nil {
		return placementRun{}, err
	}
	cpu0 := sampleCPU()
	stopProfile, err := b.profileWindow(run)
	if err != nil {
		return placementRun{}, err
	}
	crp, ms, err := b.measure(ctx, name, filepath.Join(dir, "create"), keys, firstStamp,
		func(crp *api.ClusterResourcePlacement) bool { return appliedEverywhere(crp, len(b.members), -1) })
	stopProfile()
	if err != nil {
		return res, fmt.Errorf("new placement %s: %w", name, err)
	}
	res.create, res.createCPU = ms, cpuSince(cpu0)
	if res.createRequests, err = b.requestsSince(ctx, req0); err != nil {
		return res, err
	}

	// Let it settle: the Deployments become available (the rollout's update budget counts
	// available clusters) and the reports about it are folded.
	if err := b.waitStatus(ctx, name, "Available=True", func(crp *api.ClusterResourcePlacement) bool {
		return conditionTrue(crp.Status.Conditions, string(api.ClusterResourcePlacementAvailableConditionType), crp.Generation)
	}); err != nil {
		return res, err
	}
	time.Sleep(b.settle)

	// 2. A hub change: one ConfigMap edited.
	old, err := strconv.ParseInt(crp.Status.ObservedResourceIndex, 10, 64)
	if err != nil {
		return res, fmt.Errorf("placement %s: resource index %q: %w", name, crp.Status.ObservedResourceIndex, err)
	}
	_, ms, err = b.measure(ctx, name, filepath.Join(dir, "update"), []objectKey{change.key()}, editedStamp,
		func(crp *api.ClusterResourcePlacement) bool { return appliedEverywhere(crp, len(b.members), old) })
	if err != nil {
		return res, fmt.Errorf("hub change under %s: %w", name, err)
	}
	res.update = ms
	return res, nil
}

// measure applies dir with fleetctl and waits until the members show every key with stamp
// (watched) and the status service reports done (queried, and in a status event). Nothing
// returns early: it waits for all three.
func (b *bench) measure(ctx context.Context, name, dir string, keys []objectKey, stamp string,
	done func(*api.ClusterResourcePlacement) bool) (*api.ClusterResourcePlacement, milestones, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()

	t0 := time.Now()
	if err := b.fleetctl(ctx, "apply", "-f", dir); err != nil {
		return nil, nil, err
	}
	ms := milestones{msApplied: time.Since(t0)}

	type membersResult struct {
		times []time.Time
		err   error
	}
	membersDone := make(chan membersResult, 1)
	go func() {
		times, err := b.observer.waitAll(ctx, b.members, keys, stamp)
		membersDone <- membersResult{times, err}
	}()

	var crp *api.ClusterResourcePlacement
	var queried, evented time.Time
	last := "no answer yet"
	poll := time.NewTicker(b.poll)
	defer poll.Stop()
	for queried.IsZero() || evented.IsZero() {
		wake := b.tracer.wake()
		if queried.IsZero() {
			p, err := b.query.Placement(ctx, name)
			switch {
			case err == nil && done(p):
				queried, crp = time.Now(), p
			case err == nil:
				last = summarize(p)
			default:
				last = err.Error()
			}
		}
		if evented.IsZero() {
			evented, _ = first(b.tracer.since(t0), func(e traced) bool {
				return e.status != nil && e.status.Name == name && done(e.status)
			})
		}
		if !queried.IsZero() && !evented.IsZero() {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for the status (queried: %v, status event: %v): %s: %w",
				!queried.IsZero(), !evented.IsZero(), last, ctx.Err())
		case <-wake:
		case <-poll.C:
		}
	}
	ms[msAppliedAll] = queried.Sub(t0)
	ms[msAppliedAllEvent] = evented.Sub(t0)

	m := <-membersDone
	if m.err != nil {
		return nil, nil, m.err
	}
	for i, at := range m.times {
		ms[fmt.Sprintf(msMembersDone, i+1)] = at.Sub(t0)
	}
	ms[msAllMembers] = m.times[len(m.times)-1].Sub(t0)

	b.traceMilestones(ms, t0, name, crp)
	if b.traceOut != nil {
		b.printTrace(t0, time.Now())
	}
	return crp, ms, nil
}

// traceMilestones adds the bus events of the change to ms.
func (b *bench) traceMilestones(ms milestones, t0 time.Time, name string, crp *api.ClusterResourcePlacement) {
	evs := b.tracer.since(t0)
	index, _ := strconv.ParseInt(crp.Status.ObservedResourceIndex, 10, 64)
	add := func(label string, match func(traced) bool) {
		if at, ok := first(evs, match); ok {
			ms[label] = at.Sub(t0)
		}
	}
	add(msPlacementOnBus, func(e traced) bool {
		p, ok := e.payload.(*events.PlacementUpserted)
		return ok && p.Placement.Name == name
	})
	if _, ok := ms[msPlacementOnBus]; !ok {
		// The change was a hub object only.
		add(msHubOnBus, func(e traced) bool {
			_, ok := e.payload.(*events.HubResourceUpserted)
			return ok
		})
		// A hub change is not scheduled again (scheduling is sticky).
	} else {
		add(msScheduled, func(e traced) bool {
			p, ok := e.payload.(*events.PlacementScheduledV2)
			return ok && p.Placement == name
		})
	}
	add(msSnapshot, func(e traced) bool {
		p, ok := e.payload.(*events.SnapshotCreated)
		return ok && p.Placement == name && p.Index == index
	})
	for i, at := range perCluster(evs, func(e traced) (string, bool) {
		return e.cluster, e.typ == events.TypeWorkDesired && placementToken(e.subject, "flotilla.work.") == name && e.index == index
	}) {
		ms[fmt.Sprintf(msWorkSent, i+1)] = at.Sub(t0)
	}
	for i, at := range perCluster(evs, func(e traced) (string, bool) {
		p, ok := e.payload.(*events.WorkReported)
		if !ok {
			return "", false
		}
		return p.Cluster, p.Placement == name && p.ResourceIndex == index && p.Applied.Status == string(metav1.ConditionTrue)
	}) {
		ms[fmt.Sprintf(msReported, i+1)] = at.Sub(t0)
	}
}

// waitStatus waits, untimed, until the placement's status satisfies ok.
func (b *bench) waitStatus(ctx context.Context, name, what string, ok func(*api.ClusterResourcePlacement) bool) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	last := "no answer yet"
	for {
		p, err := b.query.Placement(ctx, name)
		switch {
		case err == nil && ok(p):
			return nil
		case err == nil:
			last = summarize(p)
		default:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s of %s: %s: %w", what, name, last, ctx.Err())
		case <-time.After(b.poll):
		}
	}
}

// appliedEverywhere: ClusterResourcePlacementApplied is True for the current generation,
// the placement is on every member with Applied True, all of the workload is selected, and,
// when after >= 0, the snapshot rolled out is newer than index after on every member.
func appliedEverywhere(crp *api.ClusterResourcePlacement, members int, after int64) bool {
	st := crp.Status
	if !conditionTrue(st.Conditions, string(api.ClusterResourcePlacementAppliedConditionType), crp.Generation) {
		return false
	}
	if len(st.SelectedResources) != objectsPerNamespace || len(st.PlacementStatuses) != members {
		return false
	}
	newer := func(index string) bool {
		i, err := strconv.ParseInt(index, 10, 64)
		return err == nil && i > after
	}
	if after >= 0 && !newer(st.ObservedResourceIndex) {
		return false
	}
	for _, ps := range st.PlacementStatuses {
		if !conditionTrue(ps.Conditions, string(api.PerClusterAppliedConditionType), crp.Generation) {
			return false
		}
		if after >= 0 && (!newer(ps.ObservedResourceIndex) || ps.ObservedResourceIndex != st.ObservedResourceIndex) {
			return false
		}
	}
	return true
}

// conditionTrue: the condition is True and observed for generation.
func conditionTrue(conds []metav1.Condition, typ string, generation int64) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration >= generation
		}
	}
	return false
}

func summarize(crp *api.ClusterResourcePlacement) string {
	var parts []string
	for _, c := range crp.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s", strings.TrimPrefix(c.Type, "ClusterResourcePlacement"), c.Status))
	}
	return fmt.Sprintf("generation %d, index %s, %d cluster(s): %s", crp.Generation, crp.Status.ObservedResourceIndex,
		len(crp.Status.PlacementStatuses), strings.Join(parts, " "))
}

// printTrace writes every event seen on the bus between t0 and end, with its offset.
func (b *bench) printTrace(t0, end time.Time) {
	fmt.Fprintf(b.traceOut, "  trace from %s:\n", t0.Format("15:04:05.000"))
	for _, e := range b.tracer.since(t0) {
		if e.at.After(end) {
			break
		}
		detail := ""
		switch p := e.payload.(type) {
		case *events.WorkReported:
			detail = fmt.Sprintf(" index %d applied %s available %s observed %+dms", p.ResourceIndex, p.Applied.Status,
				p.Available.Status, p.ObservedAt.Sub(t0).Milliseconds())
		case *events.PlacementStatusChangedV2:
			detail = fmt.Sprintf(" revision %d: %s", p.Revision, summarize(e.status))
		case *events.RolloutProgressedV2:
			detail = fmt.Sprintf(" revision %d:", p.Revision)
			for _, c := range p.Clusters {
				detail += fmt.Sprintf(" %s:%v/%d", c.Cluster, c.Started, c.ResourceIndex)
			}
		}
		if e.typ == events.TypeWorkDesired {
			detail = fmt.Sprintf(" index %d", e.index)
		}
		fmt.Fprintf(b.traceOut, "  %6dms  %-34s %s%s\n", e.at.Sub(t0).Milliseconds(), strings.TrimPrefix(e.typ, "io.flotilla."), e.subject, detail)
	}
}

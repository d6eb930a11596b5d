package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/diff"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// StrategyWithDefaults fills in the documented defaults of an apply strategy.
func StrategyWithDefaults(s api.ApplyStrategy) api.ApplyStrategy {
	if s.Type == "" {
		s.Type = api.ApplyStrategyTypeClientSideApply
	}
	if s.ComparisonOption == "" {
		s.ComparisonOption = api.ComparisonOptionTypePartialComparison
	}
	if s.WhenToApply == "" {
		s.WhenToApply = api.WhenToApplyTypeAlways
	}
	if s.WhenToTakeOver == "" {
		s.WhenToTakeOver = api.WhenToTakeOverTypeAlways
	}
	return s
}

// force reports whether applies under s take fields other managers own.
// ClientSideApply overwrites like kubectl apply does; ServerSideApply
// forces only when serverSideApplyConfig.force says so.
func force(s api.ApplyStrategy) bool {
	if s.Type == api.ApplyStrategyTypeServerSideApply {
		return s.ServerSideApplyConfig != nil && s.ServerSideApplyConfig.ForceConflicts
	}
	return true
}

// Apply makes the member match w, a placement's desired state, and returns
// the report to publish. Manifests fail one by one, each with its reason; the
// error is non-nil only when the member could not be reached (it wraps
// ErrUnreachable, and the report says so for every manifest) or ctx ended.
func (a *Applier) Apply(ctx context.Context, w *events.WorkDesired) (*events.WorkReported, error) {
	if w.Cluster != a.cluster {
		return nil, fmt.Errorf("apply placement %s: desired state is for cluster %q, this is %q", w.Placement, w.Cluster, a.cluster)
	}
	p := a.state(w.Placement)
	p.mu.Lock()
	defer p.mu.Unlock()
	since := p.ranUntil
	defer func() { p.ranUntil = time.Now() }()

	r := &run{a: a, p: p, w: w, strategy: StrategyWithDefaults(w.ApplyStrategy), now: a.now(), began: time.Now()}
	prev := p.byKey
	objs := manifest.Parse(w.Manifests)
	r.objects = make([]*tracked, len(objs))
	for i, o := range objs {
		t := &tracked{obj: o}
		if old := prev[o.Key()]; old != nil && o.Object != nil {
			t.firstDrifted, t.firstDiffed, t.appliedAt = old.firstDrifted, old.firstDiffed, old.appliedAt
		}
		r.objects[i] = t
	}

	if err := a.probe(ctx); err != nil {
		for _, t := range r.objects {
			t.fail(api.ManifestApplyFailedReason, err)
		}
		r.commit(prev)
		p.scanned = false // what it owns is unknown until it can look again
		return p.report, fmt.Errorf("apply placement %s: %w", w.Placement, err)
	}

	// The first run of a placement in this process looks for every object
	// it owns, to remove those it no longer wants; that search runs beside
	// the apply, and may serve other placements' first runs too (see
	// ownedAfter).
	var scan chan scanResult
	if r.strategy.Type != api.ApplyStrategyTypeReportDiff && !p.scanned {
		scan = make(chan scanResult, 1)
		go func() {
			refs, err := a.ownedAfter(ctx, w.Placement, since)
			scan <- scanResult{refs, err}
		}()
	}

	r.applyWaves(ctx)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("apply placement %s: %w", w.Placement, err)
	}
	r.mark(&r.timing.applied)
	pruned, err := r.pruneStale(ctx, prev, scan)
	r.mark(&r.timing.pruned)
	if err != nil {
		a.log.Warn("removing objects the placement no longer wants failed; will retry on the next run",
			"placement", w.Placement, "err", err)
	}
	r.commit(prev)
	r.logTimings(ctx)
	a.refreshScanLater(ctx)
	if !pruned {
		// The next run searches the member again rather than trusting
		// this run's state to say what the placement owned before.
		p.scanned = false
	}
	if r.unreachable.Load() {
		return p.report, fmt.Errorf("apply placement %s: %w", w.Placement, ErrUnreachable)
	}
	return p.report, nil
}

// applyWaves applies the run's objects in dependency order, up to the
// applier's number of workers at once. An object of the waves up to
// WaveWorkload starts as soon as the objects it needs (manifest.Needs) are
// done; the objects of later waves (custom resources, webhooks) wait for
// every object of their prerequisite waves, and for the CRDs applied to be
// established.
func (r *run) applyWaves(ctx context.Context) {
	n := len(r.objects)
	if n == 0 {
		return
	}
	objs := make([]*unstructured.Unstructured, n)
	waves := make([]int, n)
	for i, t := range r.objects {
		if t.obj.Err == nil {
			objs[i] = t.obj.Object
		}
		waves[i] = t.obj.Wave
	}
	s := &schedule{r: r, ready: make(chan int, n), left: n, waiting: make([]int, n), dependents: make([][]int, n)}
	for i, needs := range manifest.Needs(objs, waves) {
		s.waiting[i] = len(needs)
		for _, j := range needs {
			s.dependents[j] = append(s.dependents[j], i)
		}
	}
	for i, t := range r.objects {
		s.inWave[t.obj.Wave]++
		switch {
		case t.obj.Wave >= manifest.WaveOther:
			s.held[t.obj.Wave] = append(s.held[t.obj.Wave], i)
		case s.waiting[i] == 0:
			s.ready <- i
		}
	}
	s.mu.Lock()
	first := s.releasable()
	s.mu.Unlock()
	s.release(ctx, first)

	var wg sync.WaitGroup
	for range min(r.a.workers, n) {
		wg.Go(func() {
			for i := range s.ready {
				s.started(i)
				if ctx.Err() == nil {
					r.process(ctx, r.objects[i])
				}
				s.release(ctx, s.finished(i))
			}
		})
	}
	wg.Wait()
}

// schedule is the state of applyWaves: which objects are ready, and what
// each finished object lets start.
type schedule struct {
	r     *run
	ready chan int // objects whose needs are done; closed after the last one finishes

	mu         sync.Mutex
	left       int                      // objects not finished
	waiting    []int                    // per object, its needs not finished
	dependents [][]int                  // per object, the objects that need it
	inWave     [manifest.NumWaves]int   // per wave, objects not finished
	held       [manifest.NumWaves][]int // objects waiting for whole waves, until released
	crdsWaited bool
}

func (s *schedule) started(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.r.timing.waves[s.r.objects[i].obj.Wave]
	if w[0] == 0 {
		s.r.mark(&w[0])
	}
}

// finished records that object i is done, queues the objects that needed
// only it, and returns the held objects it releases.
func (s *schedule) finished(i int) released {
	s.mu.Lock()
	defer s.mu.Unlock()
	wave := s.r.objects[i].obj.Wave
	s.inWave[wave]--
	if s.inWave[wave] == 0 {
		s.r.mark(&s.r.timing.waves[wave][1])
	}
	for _, d := range s.dependents[i] {
		s.waiting[d]--
		if s.waiting[d] == 0 {
			s.ready <- d
		}
	}
	release := s.releasable()
	s.left--
	if s.left == 0 {
		close(s.ready)
	}
	return release
}

// released are held objects let go, to queue with release. waitCRDs asks
// to wait for the run's CRDs to be established first: set for the first
// release only, so that one caller waits.
type released struct {
	objs     []int
	waitCRDs bool
}

// releasable takes the held objects whose prerequisite waves are done.
// Called with mu held.
func (s *schedule) releasable() released {
	var out released
	for wave := manifest.WaveOther; wave < manifest.NumWaves; wave++ {
		if len(s.held[wave]) == 0 {
			continue
		}
		done := true
		for _, p := range manifest.Prerequisites(wave) {
			done = done && s.inWave[p] == 0
		}
		if done {
			out.objs = append(out.objs, s.held[wave]...)
			s.held[wave] = nil
		}
	}
	if len(out.objs) > 0 && !s.crdsWaited {
		s.crdsWaited, out.waitCRDs = true, true
	}
	return out
}

// release queues held objects, once the CRDs are established if asked. The
// released objects are not finished, so ready is still open.
func (s *schedule) release(ctx context.Context, r released) {
	if r.waitCRDs {
		s.r.a.waitForCRDs(ctx, s.r.appliedCRDs())
	}
	for _, i := range r.objs {
		s.ready <- i
	}
}

// run is one Apply of a placement.
type run struct {
	a           *Applier
	p           *placement
	w           *events.WorkDesired
	strategy    api.ApplyStrategy
	now         time.Time
	objects     []*tracked
	unreachable atomic.Bool
	// began and timing say when the run's phases ended, for the debug
	// log; each field is written by one goroutine.
	began  time.Time
	timing struct {
		waves           [manifest.NumWaves][2]time.Duration // start, end
		applied, pruned time.Duration
	}

	mu        sync.Mutex
	takeovers []events.TakeoverDecision
	// created holds the namespaces this run created: nothing can have been
	// in them before, so their objects need no read before the apply.
	created map[string]bool
}

type scanResult struct {
	refs []ownedRef
	err  error
}

func (r *run) createdNamespace(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.created == nil {
		r.created = map[string]bool{}
	}
	r.created[name] = true
}

func (r *run) inCreatedNamespace(t *tracked) bool {
	if !t.namespaced {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.created[t.obj.Object.GetNamespace()]
}

// mark records the time since the run began in d.
func (r *run) mark(d *time.Duration) { *d = time.Since(r.began) }

// logTimings logs, at debug level, when each wave of the run started and
// ended, when the last wave and the removal of stale objects (which waits for
// the search for them) were done, and the whole run.
func (r *run) logTimings(ctx context.Context) {
	if !r.a.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	var waves []string
	for wave, t := range r.timing.waves {
		if t[1] > 0 {
			waves = append(waves, fmt.Sprintf("%d:%s-%s", wave, ms(t[0]), ms(t[1])))
		}
	}
	r.a.log.Debug("placement applied", "placement", r.w.Placement, "objects", len(r.objects),
		"waves", strings.Join(waves, " "), "applied", ms(r.timing.applied), "pruned", ms(r.timing.pruned),
		"took", ms(time.Since(r.began)))
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// commit makes the run's objects the placement's state and builds its report.
func (r *run) commit(prev map[manifest.Key]*tracked) {
	r.p.work = r.w
	r.p.strategy = r.strategy
	r.p.objects = r.objects
	r.p.byKey = make(map[manifest.Key]*tracked, len(r.objects))
	for _, t := range r.objects {
		if t.obj.Object != nil && t.obj.Err == nil {
			r.p.byKey[t.obj.Key()] = t
		}
	}
	slices.SortStableFunc(r.takeovers, func(x, y events.TakeoverDecision) int {
		return strings.Compare(manifest.KeyOf(x.Resource).String(), manifest.KeyOf(y.Resource).String())
	})
	r.p.report = r.a.buildReport(r.p, r.takeovers)
}

func (r *run) decide(t *tracked, outcome string, diffs []api.PatchDetail) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.takeovers = append(r.takeovers, events.TakeoverDecision{
		Resource:   t.obj.Resource,
		Mode:       r.strategy.WhenToTakeOver,
		Comparison: r.strategy.ComparisonOption,
		Outcome:    outcome,
		Diffs:      diffs,
		DecidedAt:  r.now.UTC(),
	})
}

// fail records a per-manifest failure, noting an unreachable member.
func (r *run) fail(t *tracked, reason string, err error) {
	if unreachable(err) {
		r.unreachable.Store(true)
		err = fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	t.fail(reason, err)
}

// process applies one object (or reports its diff).
func (r *run) process(ctx context.Context, t *tracked) {
	a := r.a
	if t.obj.Err != nil {
		t.fail(t.obj.Reason, t.obj.Err)
		return
	}
	if err := a.resolve(t); err != nil {
		r.fail(t, api.ManifestApplyFailedReason, err)
		return
	}
	defer a.objLocks.lock(t.obj.Key())()

	// An object in a namespace this run created cannot exist yet (short of
	// someone creating it in the same milliseconds): skip the read. On a
	// fresh member this halves the requests.
	var live *unstructured.Unstructured
	if !r.inCreatedNamespace(t) {
		var err error
		if live, err = a.get(ctx, t); err != nil {
			r.fail(t, api.ManifestApplyFailedReason, err)
			return
		}
	}
	t.live = live

	if r.strategy.Type == api.ApplyStrategyTypeReportDiff {
		r.reportDiff(ctx, t, live)
		return
	}

	placementName := r.w.Placement
	owners := []string(nil)
	if live != nil {
		owners = manifest.OwnerTokens(live.GetLabels())
	}
	ours := live != nil && manifest.OwnedBy(live.GetLabels(), placementName)
	t.owned = ours
	desired := marked(t, owners, placementName)

	takingOver := false
	if live != nil && !ours {
		if !r.mayTakeOver(ctx, t, desired, live, owners) {
			return
		}
		takingOver = true
	}

	if ours && r.strategy.WhenToApply == api.WhenToApplyTypeIfNotDrifted &&
		live.GetLabels()[manifest.ManifestHashLabel] == t.obj.Hash {
		// The same manifest was applied before: any difference now was
		// made on the member.
		if r.drifted(ctx, t, desired, live) {
			return
		}
	}

	if err := r.applyTracked(ctx, t, desired); err != nil {
		r.fail(t, api.ManifestApplyFailedReason, err)
		return
	}
	t.result.Applied = appliedOK(takingOver)
	if takingOver {
		r.decide(t, TakenOver, nil)
	}
	if live == nil && t.obj.Resource.Group == "" && t.obj.Resource.Kind == "Namespace" {
		r.createdNamespace(t.obj.Object.GetName())
	}
}

// mayTakeOver says whether the run may take over live, an object the
// placement does not own, under the strategy's takeover and co-ownership
// rules; when not, it records why on t and as a takeover decision.
// allowCoOwnership means what it means upstream: sharing the object with
// owners that are not Fleet placements (ownerReferences). Two placements
// never co-own one object (upstream refuses to place an object twice).
func (r *run) mayTakeOver(ctx context.Context, t *tracked, desired, live *unstructured.Unstructured, owners []string) bool {
	if len(owners) > 0 && r.strategy.AllowCoOwnership {
		r.fail(t, api.ManifestFailedToTakeOverReason, fmt.Errorf(
			"the object is already owned by another Fleet placement (%s); two placements never co-own one object", strings.Join(owners, ", ")))
		r.decide(t, api.ManifestFailedToTakeOverReason, nil)
		return false
	}
	if others := otherOwners(live, owners); len(others) > 0 && !r.strategy.AllowCoOwnership {
		r.fail(t, api.ManifestFailedToTakeOverReason, fmt.Errorf(
			"cannot take over object: it is owned by %s and co-ownership is not allowed", strings.Join(others, ", ")))
		r.decide(t, api.ManifestFailedToTakeOverReason, nil)
		return false
	}
	switch r.strategy.WhenToTakeOver {
	case api.WhenToTakeOverTypeNever:
		r.fail(t, api.ManifestNotTakenOverReason, errors.New(api.NotTakenOverError))
		r.decide(t, api.ManifestNotTakenOverReason, nil)
		return false
	case api.WhenToTakeOverTypeIfNoDiff:
		diffs, err := r.a.compare(ctx, t, desired, live, r.strategy.ComparisonOption)
		if err != nil {
			r.fail(t, api.ManifestApplyFailedReason, fmt.Errorf("compare with the member object before taking it over: %w", err))
			return false
		}
		if len(diffs) > 0 {
			r.fail(t, api.ManifestFailedToTakeOverReason, errors.New(api.FailedToTakeOverError))
			t.result.Diffs = diffs
			if t.firstDiffed.IsZero() {
				t.firstDiffed = r.now
			}
			r.decide(t, api.ManifestFailedToTakeOverReason, diffs)
			return false
		}
	}
	return true
}

// drifted says whether live drifted from desired, or drift detection
// failed, recording either on t: such an object is not applied.
func (r *run) drifted(ctx context.Context, t *tracked, desired, live *unstructured.Unstructured) bool {
	drifts, err := r.a.compare(ctx, t, desired, live, r.strategy.ComparisonOption)
	if err != nil {
		r.fail(t, api.ManifestFailedToRunDriftDetectionReason, err)
		return true
	}
	if len(drifts) > 0 {
		r.fail(t, api.ManifestFoundDriftsReason, errors.New(api.FoundDriftsError))
		t.result.Drifts = drifts
		t.result.ObservedGeneration = live.GetGeneration()
		if t.firstDrifted.IsZero() {
			t.firstDrifted = r.now
		}
		return true
	}
	return false
}

// applyTracked applies desired for t and records the outcome, including the
// drifts a full comparison still finds in fields the manifest does not set.
func (r *run) applyTracked(ctx context.Context, t *tracked, desired *unstructured.Unstructured) error {
	applied, err := r.a.ssa(ctx, t, desired, force(r.strategy), false)
	if err != nil {
		return err
	}
	t.owned = true
	t.live = applied
	t.appliedAt = appliedTime(applied, r.a.now())
	t.result.ObservedGeneration = applied.GetGeneration()
	t.result.Drifts = nil
	t.setSynced(applied)
	if r.strategy.ComparisonOption == api.ComparisonOptionTypeFullComparison {
		drifts, err := r.a.compare(ctx, t, desired, applied, r.strategy.ComparisonOption)
		if err == nil && len(drifts) > 0 {
			t.result.Drifts = drifts
			if t.firstDrifted.IsZero() {
				t.firstDrifted = r.now
			}
		}
	}
	if len(t.result.Drifts) == 0 {
		t.firstDrifted = time.Time{}
	}
	return nil
}

// reportDiff compares without changing anything.
func (r *run) reportDiff(ctx context.Context, t *tracked, live *unstructured.Unstructured) {
	t.result.Applied = events.Condition{}
	t.result.Available = events.Condition{}
	if live == nil {
		t.result.Diffs = diff.Redact(t.obj.Object, diff.Missing())
	} else {
		desired := marked(t, nil, r.w.Placement)
		diffs, err := r.a.compare(ctx, t, desired, live, r.strategy.ComparisonOption)
		if err != nil {
			r.fail(t, FailedToReportDiffReason, err)
			return
		}
		t.result.Diffs = diffs
		t.result.ObservedGeneration = live.GetGeneration()
	}
	if len(t.result.Diffs) == 0 {
		t.firstDiffed = time.Time{}
	} else if t.firstDiffed.IsZero() {
		t.firstDiffed = r.now
	}
}

// marked is the manifest of t as it is applied: with the marks of the
// placement and of the other owners the member object has (all of them must
// be in every apply, as they share one field manager).
func marked(t *tracked, owners []string, placementName string) *unstructured.Unstructured {
	u := t.obj.Object.DeepCopy()
	manifest.SetMarks(u, append(slices.Clone(owners), placementName), t.obj.Hash)
	return u
}

// otherOwners names what else owns live: other placements, and owner
// references to anything.
func otherOwners(live *unstructured.Unstructured, placements []string) []string {
	var out []string
	for _, p := range placements {
		out = append(out, "placement "+p)
	}
	for _, ref := range live.GetOwnerReferences() {
		out = append(out, fmt.Sprintf("%s %s", ref.Kind, ref.Name))
	}
	return out
}

// appliedCRDs lists the CRDs this run applied, to wait for.
func (r *run) appliedCRDs() []*tracked {
	var out []*tracked
	for _, t := range r.objects {
		if t.obj.Object != nil && t.gvr.GroupResource() == crdGVR.GroupResource() && t.result.Applied.Status == statusTrue {
			out = append(out, t)
		}
	}
	return out
}

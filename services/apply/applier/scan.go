package applier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// Searching the member for what placements own lists every resource it
// serves (about 60 on a bare API server): more requests than a placement of
// 20 objects makes to apply them. The first run of each placement after a
// start needs such a search, to remove the objects it owned that its desired
// state no longer lists; one search of everything Flotilla manages serves
// the first runs of every placement that start within scanReuse of it.
//
// That is as complete as a search of the placement's own: only this
// Applier's runs of a placement mark objects as the placement's (one worker
// per member), and a run of it uses a search that started after its
// previous run ended, adding what that run applied. A search can only be
// out of date about objects that lost the placement's mark or went away,
// and removal reads each object again first.

// scanReuse is how long a search of the member serves placements' first
// runs. (Variables, for tests.)
var scanReuse = time.Minute

// A first run that finds the last search older than scanRefreshAfter uses it,
// and a new search starts scanRefreshDelay after the run: a member that keeps
// receiving new placements then always has a search to reuse, and none of
// those runs waits for one (60 lists, on the member's API server and here,
// while the run's objects are applied). The delay keeps the search out of the
// burst the run may be part of.
var (
	scanRefreshAfter = scanReuse / 2
	scanRefreshDelay = 2 * time.Second
)

// memberScan is one search of the member for every object Flotilla manages.
type memberScan struct {
	started time.Time
	done    chan struct{} // closed when owned and err are set
	owned   map[string][]ownedRef
	err     error
}

// ownedAfter returns the member objects marked as placementName's, from a
// search that started after since (zero: any) and within scanReuse: the one
// in progress or last made if it qualifies, else a new one.
func (a *Applier) ownedAfter(ctx context.Context, placementName string, since time.Time) ([]ownedRef, error) {
	a.scanMu.Lock()
	s := a.scan
	if s == nil || !s.started.After(since) || time.Since(s.started) > scanReuse || s.failed() {
		s = a.startScan(ctx)
	} else if time.Since(s.started) > scanRefreshAfter {
		a.scanRefresh = true
	}
	a.scanMu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, placementSearchError(placementName, s.err)
	}
	return slices.Clone(s.owned[ownerToken(placementName)]), nil
}

// startScan starts a search of the member and makes it the last one. Called
// with scanMu held.
func (a *Applier) startScan(ctx context.Context) *memberScan {
	s := &memberScan{started: time.Now(), done: make(chan struct{})}
	a.scan = s
	go func() {
		defer close(s.done)
		found, err := a.search(ctx, manifest.ManagedBySelector)
		if err != nil {
			s.err = err
			return
		}
		s.owned = map[string][]ownedRef{}
		for _, f := range found {
			for _, tok := range f.owners {
				s.owned[tok] = append(s.owned[tok], f.ref)
			}
		}
	}()
	return s
}

// refreshScanLater starts a new search scanRefreshDelay from now when a first
// run asked for one (see scanRefreshAfter), unless a search started in the
// meantime. The search outlives the run's ctx, bounded by scanReuse.
func (a *Applier) refreshScanLater(ctx context.Context) {
	a.scanMu.Lock()
	defer a.scanMu.Unlock()
	if !a.scanRefresh {
		return
	}
	a.scanRefresh = false
	last, reuse := a.scan, scanReuse
	ctx = context.WithoutCancel(ctx)
	time.AfterFunc(scanRefreshDelay, func() {
		a.scanMu.Lock()
		defer a.scanMu.Unlock()
		if a.scan != last {
			return // a run needed one sooner
		}
		sctx, cancel := context.WithTimeout(ctx, reuse)
		s := a.startScan(sctx)
		go func() {
			<-s.done
			cancel()
		}()
	})
}

// failed reports whether the search ended in an error.
func (s *memberScan) failed() bool {
	select {
	case <-s.done:
		return s.err != nil
	default:
		return false
	}
}

// scanOwned finds every member object the placement owns now, by listing
// each resource for the placement's mark.
func (a *Applier) scanOwned(ctx context.Context, placementName string) ([]ownedRef, error) {
	selector := manifest.ManagedBySelector + "," + manifest.OwnerLabel(placementName) + "=" + manifest.OwnerValue
	found, err := a.search(ctx, selector)
	if err != nil {
		return nil, placementSearchError(placementName, err)
	}
	tok := ownerToken(placementName)
	var out []ownedRef
	for _, f := range found {
		if slices.Contains(f.owners, tok) {
			out = append(out, f.ref)
		}
	}
	return out, nil
}

// placementSearchError is err, from a search for a placement's objects, as
// the placement's runs report it.
func placementSearchError(placementName string, err error) error {
	if errors.Is(err, ErrUnreachable) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("find objects of placement %s: %w", placementName, err)
}

// found is a member object carrying Flotilla's marks, with the tokens of the
// placements that own it.
type found struct {
	ref    ownedRef
	owners []string
}

// search lists the objects selector selects in every resource the member
// serves.
func (a *Applier) search(ctx context.Context, selector string) ([]found, error) {
	res, err := a.resources()
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		out  []found
		errs []error
	)
	forEach(ctx, 8, res, func(r listable) {
		list, err := a.meta.Resource(r.gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsForbidden(err) {
				return
			}
			errs = append(errs, fmt.Errorf("list %s: %w", r.gvr, err))
			return
		}
		for _, item := range list.Items {
			owners := manifest.OwnerTokens(item.Labels)
			if len(owners) == 0 {
				continue
			}
			gk := schema.GroupKind{Group: r.gvr.Group, Kind: r.kind}
			out = append(out, found{owners: owners, ref: ownedRef{
				gvr: r.gvr, namespaced: r.namespaced, uid: item.UID, wave: manifest.WaveOf(gk),
				key: manifest.Key{Group: gk.Group, Kind: gk.Kind, Namespace: item.Namespace, Name: item.Name},
			}})
		}
	})
	if err := errors.Join(errs...); err != nil {
		if unreachable(err) {
			return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		return nil, err
	}
	return out, ctx.Err()
}

// ownerToken is the name part of placementName's owner label.
func ownerToken(placementName string) string {
	return strings.TrimPrefix(manifest.OwnerLabel(placementName), manifest.OwnerLabelPrefix)
}

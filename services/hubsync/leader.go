package hubsync

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseName is the Lease on the hub that elects the replica that syncs.
const leaseName = "flotilla-hubsync"

// Leader election timing, as Kubernetes' own controllers have it.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// lead runs run while this replica holds the hub's Lease, again each time it wins it back,
// until ctx ends. One replica syncs at a time, so two never publish the same change from
// different views of the hub; another takes over within leaseDuration of a crash, and at once
// when the leader stops cleanly (it releases the Lease). A run that fails gives the Lease up
// and is retried after a pause.
func lead(ctx context.Context, kube kubernetes.Interface, namespace, identity string, log *slog.Logger, run func(context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: leaseName, Namespace: namespace},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	for ctx.Err() == nil {
		term, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		var started atomic.Bool
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnCancel: true, Name: leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					started.Store(true)
					log.Info("leading: syncing the hub", "identity", identity)
					err := run(lctx)
					cancel() // a run that ended gives the Lease up
					done <- err
				},
				OnStoppedLeading: func() { log.Info("not leading", "identity", identity) },
			},
		})
		if err != nil {
			cancel()
			return err
		}
		le.Run(term)
		cancel()
		if !started.Load() {
			continue // never led in this term (ctx ended while waiting)
		}
		// Run returns when the Lease is lost; the run it started may still be stopping.
		if err := <-done; err != nil && ctx.Err() == nil {
			log.Warn("sync stopped; trying again", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}

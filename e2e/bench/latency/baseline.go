package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// baselineRun is one run of a baseline: creating the namespace and its 20 objects on every
// member, then applying the edited ConfigMap to every member.
type baselineRun struct {
	create, update time.Duration
	createCPU      cpuUse    // the CPU the machine's processes used during create
	createRequests apiCounts // what the members' API servers were asked during create (-requests)
}

// runKubectl applies the same objects (in a namespace of its own) with `kubectl apply
// --server-side -f DIR` to each member in turn, as a person with three kubeconfigs would,
// then the edited ConfigMap the same way. kubectl returns once the API server has stored
// every object.
func (b *bench) runKubectl(ctx context.Context, run string) (baselineRun, error) {
	ns := "bench-kubectl-" + run
	objs := workload(ns, run)
	dir := filepath.Join(b.workDir, "kubectl-"+run)
	createDir, updateDir := filepath.Join(dir, "create"), filepath.Join(dir, "update")
	if err := writeYAML(filepath.Join(createDir, "objects.yaml"), documents(objs)...); err != nil {
		return baselineRun{}, err
	}
	change := edited(objs)
	if err := writeYAML(filepath.Join(updateDir, change.obj.GetName()+".yaml"), change.obj.Object); err != nil {
		return baselineRun{}, err
	}
	var res baselineRun
	var err error
	if res.create, err = b.kubectlEach(ctx, createDir); err != nil {
		return res, err
	}
	res.update, err = b.kubectlEach(ctx, updateDir)
	return res, err
}

func (b *bench) kubectlEach(ctx context.Context, dir string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	t0 := time.Now()
	for _, m := range b.members {
		cmd := exec.CommandContext(ctx, b.kubectl, "--kubeconfig", m.kubeconfig, "--cache-dir", b.kubectlCache,
			"apply", "--server-side", "-f", dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("kubectl apply --server-side -f %s on %s: %w\n%s", dir, m.name, err, out)
		}
	}
	return time.Since(t0), nil
}

// runClientGo is the physical limit: server-side applies of the same objects straight to
// the members, all members at once and, after each member's Namespace, all of its objects
// at once; then the edited ConfigMap to all members at once.
func (b *bench) runClientGo(ctx context.Context, run string) (baselineRun, error) {
	ns := "bench-clientgo-" + run
	objs := workload(ns, run)
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	var res baselineRun
	req0, err := b.requestsBefore(ctx)
	if err != nil {
		return res, err
	}
	cpu0 := sampleCPU()
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for _, m := range b.members {
		g.Go(func() error {
			if err := ssa(gctx, m, objs[0]); err != nil {
				return err
			}
			mg, mctx := errgroup.WithContext(gctx)
			for _, o := range objs[1:] {
				mg.Go(func() error { return ssa(mctx, m, o) })
			}
			return mg.Wait()
		})
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	res.create, res.createCPU = time.Since(t0), cpuSince(cpu0)
	if res.createRequests, err = b.requestsSince(ctx, req0); err != nil {
		return res, err
	}

	change := edited(objs)
	t0 = time.Now()
	g, gctx = errgroup.WithContext(ctx)
	for _, m := range b.members {
		g.Go(func() error { return ssa(gctx, m, change) })
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	res.update = time.Since(t0)
	return res, nil
}

func ssa(ctx context.Context, m *member, o object) error {
	_, err := m.client.Resource(o.gvr).Namespace(o.obj.GetNamespace()).Apply(ctx, o.obj.GetName(), o.obj,
		metav1.ApplyOptions{FieldManager: "bench-client-go", Force: true})
	if err != nil {
		return fmt.Errorf("apply %s on %s: %w", o.key(), m.name, err)
	}
	return nil
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-dev/flotilla/platform/health"
)

// Options configure the apply service: one worker (Cluster and Kubeconfig) or
// one per kubeconfig file in KubeconfigDir, in one process.
type Options struct {
	// NATSURL is the bus. NATSCredentials is a .creds file, optional.
	NATSURL         string
	NATSCredentials string
	// Cluster and Kubeconfig run one worker for one member.
	Cluster    string
	Kubeconfig string
	// KubeconfigDir runs a worker per file: the member's name is the file
	// name without its extension (.kubeconfig, .yaml, .yml, .conf).
	KubeconfigDir string
	// HeartbeatPeriod, ResyncPeriod and Placements tune each worker; zero
	// values take Config's defaults.
	HeartbeatPeriod time.Duration
	ResyncPeriod    time.Duration
	Placements      int
	// HealthAddr, when set, serves /healthz and /readyz (ready while
	// connected to NATS).
	HealthAddr string
	Logger     *slog.Logger
}

// Member is a member cluster to run a worker for.
type Member struct {
	Name string
	REST *rest.Config
}

// Members returns the members opts names.
func (o Options) Members() ([]Member, error) {
	switch {
	case o.KubeconfigDir != "" && (o.Kubeconfig != "" || o.Cluster != ""):
		return nil, errors.New("give either --kubeconfig-dir or --cluster with --kubeconfig, not both")
	case o.KubeconfigDir != "":
		return membersInDir(o.KubeconfigDir)
	case o.Cluster == "":
		return nil, errors.New("--cluster (with --kubeconfig) or --kubeconfig-dir is required")
	}
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return []Member{{Name: o.Cluster, REST: cfg}}, nil
}

var kubeconfigExts = []string{".kubeconfig", ".yaml", ".yml", ".conf"}

func membersInDir(dir string) ([]Member, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig dir: %w", err)
	}
	var out []Member
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		ext := filepath.Ext(e.Name())
		if !slices.Contains(kubeconfigExts, ext) {
			continue
		}
		cfg, err := restConfig(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Member{Name: strings.TrimSuffix(e.Name(), ext), REST: cfg})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("kubeconfig dir %s holds no %s files", dir, strings.Join(kubeconfigExts, ", "))
	}
	return out, nil
}

// restConfig loads a kubeconfig file; "" means the usual rules ($KUBECONFIG,
// ~/.kube/config, in-cluster).
func restConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// Run connects to the bus and runs a worker for each member until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	members, err := opts.Members()
	if err != nil {
		return err
	}
	natsOpts := []nats.Option{nats.Name("flotilla-apply"), nats.MaxReconnects(-1)}
	if opts.NATSCredentials != "" {
		natsOpts = append(natsOpts, nats.UserCredentials(opts.NATSCredentials))
	}
	url := opts.NATSURL
	if url == "" {
		url = nats.DefaultURL
	}
	nc, err := nats.Connect(url, natsOpts...)
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	cfg := Config{
		HeartbeatPeriod: opts.HeartbeatPeriod,
		ResyncPeriod:    opts.ResyncPeriod,
		Placements:      opts.Placements,
		Logger:          opts.Logger,
	}
	if opts.HealthAddr == "" {
		return RunMembers(ctx, js, members, cfg)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return health.Serve(gctx, opts.HealthAddr, func(context.Context) error {
			if nc.Status() != nats.CONNECTED {
				return errors.New("not connected to NATS")
			}
			return nil
		})
	})
	g.Go(func() error { return RunMembers(gctx, js, members, cfg) })
	return g.Wait()
}

// RunMembers runs a worker per member on js until ctx ends, each configured
// as base with its own Cluster and REST. One failing worker stops them all.
func RunMembers(ctx context.Context, js jetstream.JetStream, members []Member, base Config) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, m := range members {
		cfg := base
		cfg.Cluster, cfg.REST, cfg.JetStream = m.Name, m.REST, js
		w, err := New(cfg)
		if err != nil {
			return err
		}
		g.Go(func() error { return w.Run(gctx) })
	}
	return g.Wait()
}

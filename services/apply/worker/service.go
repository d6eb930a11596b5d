package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
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

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
)

// Options configure the apply service: one worker (Cluster and Kubeconfig) or
// one per kubeconfig file in KubeconfigDir, in one process.
type Options struct {
	// Options are the shared service settings; the role is always service.Member: an
	// apply worker keeps no database and declares no streams.
	service.Options
	// Cluster and Kubeconfig run one worker for one member.
	Cluster    string
	Kubeconfig string
	// KubeconfigDir runs a worker per file: the member's name is the file
	// name without its extension (.kubeconfig, .yaml, .yml, .conf).
	KubeconfigDir string
	// HeartbeatPeriod, ResyncPeriod, Placements and MaxInFlight tune each
	// worker; zero values take Config's defaults.
	HeartbeatPeriod time.Duration
	ResyncPeriod    time.Duration
	Placements      int
	MaxInFlight     int
}

// RegisterFlags adds the apply service's own flags.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Cluster, "cluster", "", "member cluster name (with --kubeconfig)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the member (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&o.KubeconfigDir, "kubeconfig-dir", "", "run a worker per kubeconfig file in this directory, named after the file")
	fs.DurationVar(&o.HeartbeatPeriod, "heartbeat-period", 0, "member heartbeat period (default 60s)")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", 0, "re-apply every placement this often (default 5m)")
	fs.IntVar(&o.Placements, "placements", 0, "placements applied at once per member (default 4)")
	fs.IntVar(&o.MaxInFlight, "max-inflight", 0, fmt.Sprintf("requests in flight to each member, all placements together (default %d)", applier.DefaultMaxInFlight))
}

// Validate checks the shared options and the worker's tuning; Members checks which
// members to run for.
func (o *Options) Validate() error {
	errs := []error{o.Options.Validate()}
	if o.HeartbeatPeriod < 0 || o.ResyncPeriod < 0 || o.Placements < 0 || o.MaxInFlight < 0 {
		errs = append(errs, errors.New("--heartbeat-period, --resync-period, --placements and --max-inflight must not be negative"))
	}
	return errors.Join(errs...)
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
func Run(ctx context.Context, opts Options) (err error) {
	defer func() { err = service.Stopped(ctx, err) }()
	opts.Role = service.Member
	if err := opts.Validate(); err != nil {
		return err
	}
	members, err := opts.Members()
	if err != nil {
		return err
	}
	inbox, err := inboxPrefix(members)
	if err != nil {
		return err
	}
	opts.NATSOptions = append(slices.Clone(opts.NATSOptions), nats.CustomInboxPrefix(inbox))
	env, err := service.Open(ctx, "apply", opts.Options)
	if err != nil {
		return err
	}
	defer env.Close()
	cfg := Config{
		HeartbeatPeriod: opts.HeartbeatPeriod,
		ResyncPeriod:    opts.ResyncPeriod,
		Placements:      opts.Placements,
		MaxInFlight:     opts.MaxInFlight,
		Logger:          env.Log,
		Metrics:         env.Metrics,
	}
	return env.Run(ctx, func(ctx context.Context) error { return RunMembers(ctx, env.JS, members, cfg) })
}

// inboxPrefix is where replies to the workers come back: the member's own inbox
// prefix, the only one its NATS user may subscribe to. Workers for several members
// share one connection, and so one user allowed on all their subjects: _INBOX.apply.
func inboxPrefix(members []Member) (string, error) {
	if len(members) == 1 {
		return bus.MemberInboxPrefix(members[0].Name)
	}
	return bus.InboxPrefix("apply")
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

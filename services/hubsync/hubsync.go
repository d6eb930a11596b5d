// Package hubsync is the hub connector: it lets kubectl, GitOps tools and Fleet's own tooling
// use a real Kubernetes API server as the hub. It installs the Fleet CRDs there, publishes
// what users apply as the events fleetctl apply publishes (placements, member clusters, and
// the hub objects placements select), publishes their deletion, writes each placement's and
// member cluster's status back into its status subresource, and judges Fleet objects at the
// door with an admission webhook that gives fleetctl's field-path errors.
//
// The bus stays the engine: hubsync only translates. One replica syncs at a time (a Lease on
// the hub); what it published is recorded per event subject in a key-value bucket on the bus,
// and every event id is derived from its content and the subject's last event (package
// submit), so a restart, a second replica or a new leader publishes nothing twice.
package hubsync

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/fleetctl/submit"
)

// Environment variables that give hubsync's flags their defaults.
const (
	EnvKubeconfig = "FLOTILLA_HUB_KUBECONFIG"
	EnvNamespace  = "FLOTILLA_HUB_NAMESPACE"
)

// DefaultNamespace is hubsync's namespace on the hub: its Lease and the webhook's certificate.
const DefaultNamespace = "flotilla-system"

// Config configures hubsync.
type Config struct {
	service.Options
	// Kubeconfig is the hub's kubeconfig; empty uses the in-cluster configuration.
	Kubeconfig string
	// REST, when set, reaches the hub instead of Kubeconfig (the standalone, tests).
	REST *rest.Config
	// Namespace on the hub for hubsync's Lease and certificate (default DefaultNamespace).
	Namespace string
	// WebhookListen is the address the admission webhook listens on (":9443"); empty: no
	// webhook, and invalid objects are refused only when hubsync reads them.
	WebhookListen string
	// WebhookURL is how the hub's API server reaches the webhook, https://host:port. Empty:
	// https:// and the address it listens on, which must then name a host.
	WebhookURL string
	// WebhookService, namespace/name:port, reaches the webhook through a Service of the hub
	// instead (hubsync runs in the hub cluster).
	WebhookService string
	// Identity names this replica in the Lease (default the host name and a random suffix).
	Identity string
	// OwnProcess says hubsync runs in a process of its own, so it may send client-go's
	// process-wide log (klog) into its log. Embedded (the standalone, tests), other
	// goroutines already use klog and changing its logger would race with them.
	OwnProcess bool
	// AfterPass, when set, hears of each pass the leader completes (tests).
	AfterPass func(Pass)
}

// RegisterFlags adds hubsync's own flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", os.Getenv(EnvKubeconfig), "kubeconfig of the hub cluster (env "+EnvKubeconfig+"; empty: the in-cluster configuration)")
	fs.StringVar(&c.Namespace, "hub-namespace", envOr(EnvNamespace, DefaultNamespace), "namespace on the hub for hubsync's Lease and webhook certificate (env "+EnvNamespace+")")
	fs.StringVar(&c.WebhookListen, "webhook-listen", "", "address the admission webhook listens on, e.g. :9443 (empty: no webhook)")
	fs.StringVar(&c.WebhookURL, "webhook-url", "", "URL at which the hub's API server reaches the webhook, https://host:port (default: from --webhook-listen)")
	fs.StringVar(&c.WebhookService, "webhook-service", "", "reach the webhook through this Service of the hub instead, namespace/name:port")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Validate checks the configuration, naming each problem's flag.
func (c *Config) Validate() error {
	c.Role = service.Connector
	errs := []error{c.Options.Validate()}
	if c.WebhookURL != "" {
		if u, err := url.Parse(c.WebhookURL); err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, fmt.Errorf("--webhook-url: %q is not an https://host:port URL", c.WebhookURL))
		}
	}
	if c.WebhookService != "" {
		if _, _, _, err := parseService(c.WebhookService); err != nil {
			errs = append(errs, fmt.Errorf("--webhook-service: %w", err))
		}
	}
	if (c.WebhookURL != "" || c.WebhookService != "") && c.WebhookListen == "" {
		errs = append(errs, errors.New("--webhook-url and --webhook-service need --webhook-listen"))
	}
	return errors.Join(errs...)
}

// Run runs hubsync until ctx ends.
func Run(ctx context.Context, cfg Config) (err error) {
	defer func() { err = service.Stopped(ctx, err) }()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("hubsync: %w", err)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Identity == "" {
		cfg.Identity = identity()
	}
	rc, err := cfg.restConfig()
	if err != nil {
		return fmt.Errorf("hubsync: %w", err)
	}
	h, err := connectHub(rc)
	if err != nil {
		return fmt.Errorf("hubsync: %w", err)
	}
	if err := h.installCRDs(ctx); err != nil {
		return fmt.Errorf("hubsync: %w (can the kubeconfig's user create CustomResourceDefinitions?)", err)
	}
	if err := h.ensureNamespace(ctx, cfg.Namespace); err != nil {
		return fmt.Errorf("hubsync: %w", err)
	}
	env, err := service.Open(ctx, "hubsync", cfg.Options)
	if err != nil {
		return fmt.Errorf("hubsync: %w", err)
	}
	defer env.Close()
	if cfg.OwnProcess {
		// client-go's leader election and informers log through klog: into the
		// service's log.
		klog.SetSlogLogger(env.Log.With("component", "client-go"))
	}
	kv, err := bus.EnsureHubSyncBucket(ctx, env.JS, cfg.Topology)
	if err != nil {
		return fmt.Errorf("hubsync: %w", err)
	}
	pub, err := submit.New(ctx, env.JS)
	if err != nil {
		return fmt.Errorf("hubsync: %w", err)
	}
	pub.AsHub()
	var loops []service.Runnable
	if cfg.WebhookListen != "" {
		serve, err := startWebhook(ctx, h, cfg, env.Log)
		if err != nil {
			return fmt.Errorf("hubsync: %w", err)
		}
		loops = append(loops, serve)
	}
	loops = append(loops, func(ctx context.Context) error {
		return lead(ctx, h.kube, cfg.Namespace, cfg.Identity, env.Log, func(ctx context.Context) error {
			return syncHub(ctx, h, env, kv, pub, cfg)
		})
	})
	return env.Run(ctx, loops...)
}

// syncHub is the leader's work: watch the hub, publish what it says, write statuses back.
func syncHub(ctx context.Context, h *hub, env *service.Env, kv jetstream.KeyValue, pub *submit.Publisher, cfg Config) error {
	recs, err := loadRecords(ctx, kv)
	if err != nil {
		return err
	}
	disc := h.kube.Discovery()
	w := newWatcher(disc, h.dyn, env.Log)
	s := &syncer{watch: w, pub: pub, recs: recs, conv: NewConversions(), log: env.Log, namespace: cfg.Namespace}
	st := newStatusWriter(w, h.dyn, env.NC, env.Log, s.owns)
	w.onObject = st.seen
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.run(ctx) })
	g.Go(func() error { return s.run(ctx, cfg.AfterPass) })
	g.Go(func() error { return st.run(ctx) })
	return g.Wait()
}

func (c Config) restConfig() (*rest.Config, error) {
	if c.REST != nil {
		return c.REST, nil
	}
	if c.Kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig (or %s) for the hub, and not running in a cluster: %w", EnvKubeconfig, err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("hub kubeconfig %s: %w", c.Kubeconfig, err)
	}
	return rc, nil
}

func identity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return strings.TrimPrefix(host+"-"+hex.EncodeToString(b), "-")
}

// startWebhook takes the serving certificate, listens, and registers the webhook on the hub;
// the returned loop serves it until ctx ends.
func startWebhook(ctx context.Context, h *hub, cfg Config, log *slog.Logger) (service.Runnable, error) {
	ln, err := net.Listen("tcp", cfg.WebhookListen)
	if err != nil {
		return nil, fmt.Errorf("webhook: listen on %s: %w", cfg.WebhookListen, err)
	}
	client, host, err := webhookClient(cfg, ln.Addr())
	if err != nil {
		ln.Close()
		return nil, err
	}
	cert, ca, err := servingCert(ctx, h.kube, cfg.Namespace, []string{host})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	client.CABundle = ca
	mux := http.NewServeMux()
	mux.Handle(WebhookPath, &webhook{log: log})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	if err := h.registerWebhook(ctx, client); err != nil {
		ln.Close()
		return nil, err
	}
	log.Info("admission webhook serving", "listen", ln.Addr().String(), "host", host)
	return func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("webhook: %w", err)
		}
		return nil
	}, nil
}

// webhookClient is how the hub reaches the webhook, and the host its certificate must name.
func webhookClient(cfg Config, addr net.Addr) (admissionregistrationv1.WebhookClientConfig, string, error) {
	if cfg.WebhookService != "" {
		ns, name, port, err := parseService(cfg.WebhookService)
		if err != nil {
			return admissionregistrationv1.WebhookClientConfig{}, "", err
		}
		path := WebhookPath
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: ns, Name: name, Port: &port, Path: &path}}, name + "." + ns + ".svc", nil
	}
	raw := cfg.WebhookURL
	if raw == "" {
		host, _, _ := net.SplitHostPort(cfg.WebhookListen)
		if host == "" || host == "0.0.0.0" || host == "::" {
			return admissionregistrationv1.WebhookClientConfig{}, "", fmt.Errorf("--webhook-listen %s names no host the hub could reach: give --webhook-url", cfg.WebhookListen)
		}
		raw = "https://" + addr.String()
	}
	u, err := url.Parse(raw)
	if err != nil {
		return admissionregistrationv1.WebhookClientConfig{}, "", fmt.Errorf("--webhook-url: %w", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + WebhookPath
	s := u.String()
	return admissionregistrationv1.WebhookClientConfig{URL: &s}, u.Hostname(), nil
}

// parseService reads namespace/name:port.
func parseService(s string) (namespace, name string, port int32, err error) {
	ns, rest, ok := strings.Cut(s, "/")
	if !ok || ns == "" {
		return "", "", 0, fmt.Errorf("%q is not namespace/name:port", s)
	}
	name, p, ok := strings.Cut(rest, ":")
	var n int
	if ok {
		_, err = fmt.Sscanf(p, "%d", &n)
	}
	if !ok || name == "" || err != nil || n < 1 || n > 65535 {
		return "", "", 0, fmt.Errorf("%q is not namespace/name:port", s)
	}
	return ns, name, int32(n), nil
}

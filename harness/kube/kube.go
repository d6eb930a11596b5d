// Package kube runs real Kubernetes member clusters for tests: one etcd and, per member, a
// kube-apiserver (with its own etcd prefix, so members share nothing) and a
// kube-controller-manager running the controllers that make deletion and Deployments behave as
// on a real cluster (garbage collector, namespace, deployment, replicaset). There is no kubelet:
// pods are created but never run, unless a SimulatedNode reports them running.
//
// The binaries are built once from the Kubernetes and etcd Go modules by hack/kube-bins.sh.
package kube

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/harness/internal/proc"
)

// DefaultControllers are the kube-controller-manager controllers a member runs: enough for
// namespaces to finish deleting, ownerReference cascades, and Deployments to report status.
var DefaultControllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"deployment-controller",
	"replicaset-controller",
}

// Options configures Start.
type Options struct {
	// Members names the member clusters. When empty, N members named member-1 ... member-N
	// are started (one if N is 0 too).
	Members []string
	N       int
	// Dir is where the environment's scratch directory is created (default os.TempDir()).
	Dir string
	// DataDir keeps the environment in this directory across runs, for the quick start: etcd's
	// data, the service-account keys, and per member its serving certificate, token, port and
	// kubeconfig. A later Start with the same DataDir brings the same clusters back, on the
	// same ports when they are still free, so kubeconfigs written before stay valid. etcd
	// syncs its writes, and Stop shuts the processes down gracefully and leaves the
	// directory. Empty: a throwaway environment in a scratch directory under Dir.
	DataDir string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager (default BinDir()).
	BinDir string
	// NoControllerManager runs API servers alone: namespaces then never finish deleting and
	// nothing cascades. Most tests want the controller manager.
	NoControllerManager bool
	// Controllers overrides DefaultControllers.
	Controllers []string
	// ReadyTimeout bounds the wait for each process to become ready (default 3 minutes: the
	// machine may be busy compiling).
	ReadyTimeout time.Duration
	// Log receives progress lines (processes started, ready times, unexpected exits).
	Log io.Writer
}

// Env is a running set of member clusters.
type Env struct {
	binDir      string
	dir         string
	log         io.Writer
	controllers []string // nil: no controller manager
	timeout     time.Duration
	etcd        *process
	etcdURL     string
	saKey       string // service-account signing key (private)
	saPub       string // and its public half, for verification
	// persistent: dir is the caller's DataDir, kept by Stop; ports records the ports used.
	persistent bool
	ports      *portBook

	mu      sync.Mutex
	members map[string]*member
	order   []string
	stopped bool
}

// Start starts an etcd and the members, in parallel, and returns when every API server is
// ready. ctx bounds the start only; the processes run until Stop (or the test binary's death).
func Start(ctx context.Context, opts Options) (*Env, error) {
	names := slices.Clone(opts.Members)
	if len(names) == 0 {
		n := max(opts.N, 1)
		for i := 1; i <= n; i++ {
			names = append(names, fmt.Sprintf("member-%d", i))
		}
	}
	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = BinDir(); err != nil {
			return nil, fmt.Errorf("start members: %w", err)
		}
	}
	var dir string
	if opts.DataDir != "" {
		var err error
		if dir, err = filepath.Abs(opts.DataDir); err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			return nil, fmt.Errorf("start members: data dir: %w", err)
		}
	} else {
		base := opts.Dir
		if base == "" {
			base = os.TempDir()
		}
		var err error
		if dir, err = proc.ScratchDir(base, "flotilla-kube-"); err != nil {
			return nil, fmt.Errorf("start members: %w", err)
		}
	}
	e := &Env{
		binDir:     binDir,
		dir:        dir,
		log:        opts.Log,
		timeout:    opts.ReadyTimeout,
		members:    map[string]*member{},
		persistent: opts.DataDir != "",
		ports:      &portBook{path: filepath.Join(dir, portsFile)},
	}
	if e.persistent {
		if err := e.ports.load(); err != nil {
			return nil, fmt.Errorf("start members: %w", err)
		}
	}
	if e.log == nil {
		e.log = io.Discard
	}
	if e.timeout == 0 {
		e.timeout = 3 * time.Minute
	}
	if !opts.NoControllerManager {
		e.controllers = DefaultControllers
		if len(opts.Controllers) > 0 {
			e.controllers = opts.Controllers
		}
	}
	if err := e.writeServiceAccountKey(); err != nil {
		e.Stop()
		return nil, fmt.Errorf("start members: %w", err)
	}
	if err := e.startEtcd(ctx); err != nil {
		e.Stop()
		return nil, fmt.Errorf("start members: %w", err)
	}
	if err := e.AddMembers(ctx, names...); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// writeServiceAccountKey makes the RSA key pair the API servers sign and verify service
// account tokens with; a persistent environment keeps the pair it made before, so tokens
// issued then stay valid.
func (e *Env) writeServiceAccountKey() error {
	e.saKey = filepath.Join(e.dir, "sa.key")
	e.saPub = filepath.Join(e.dir, "sa.pub")
	if e.persistent && fileExists(e.saKey) && fileExists(e.saPub) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(e.saKey, privPEM, 0o600); err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	if err := os.WriteFile(e.saPub, pubPEM, 0o644); err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	return nil
}

// Dir is the environment's scratch directory: etcd data, and per member its certificates,
// kubeconfig and process logs (kube-apiserver.log, kube-controller-manager.log).
func (e *Env) Dir() string { return e.dir }

// gracePeriod bounds a graceful stop of a persistent environment's processes before they are
// killed.
const gracePeriod = 20 * time.Second

// Stop kills every process and removes the scratch directory; a persistent environment's
// processes are asked to exit (SIGTERM) and given time to, and its directory is kept. It is
// safe to call more than once.
func (e *Env) Stop() error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	members := make([]*member, 0, len(e.members))
	for _, m := range e.members {
		members = append(members, m)
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(m.stop)
	}
	wg.Wait()
	if e.etcd != nil {
		if e.persistent {
			e.etcd.stopWith(syscall.SIGTERM, gracePeriod)
		} else {
			e.etcd.stop()
		}
	}
	if e.persistent {
		return nil
	}
	if err := os.RemoveAll(e.dir); err != nil {
		return fmt.Errorf("stop members: %w", err)
	}
	return nil
}

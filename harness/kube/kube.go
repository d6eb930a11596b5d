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
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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

type member struct {
	graceful   bool // stop with SIGTERM and a grace period (persistent data)
	name       string
	dir        string
	url        string
	token      string
	apiserver  *process
	kcm        *process
	kubeconfig string
	rest       *rest.Config
	ready      time.Duration
}

// memberName keeps names usable as etcd prefixes, file names and kubeconfig contexts.
var memberName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

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

// AddMembers starts more members in a running environment, in parallel, for tests where a
// cluster joins the fleet later.
func (e *Env) AddMembers(ctx context.Context, names ...string) error {
	e.mu.Lock()
	for i, name := range names {
		if !memberName.MatchString(name) {
			e.mu.Unlock()
			return fmt.Errorf("start member %q: a name must be lowercase letters, digits and '-'", name)
		}
		if _, ok := e.members[name]; ok || slices.Contains(names[:i], name) {
			e.mu.Unlock()
			return fmt.Errorf("start member %s: already started", name)
		}
	}
	e.mu.Unlock()

	errs := make([]error, len(names))
	started := make([]*member, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { started[i], errs[i] = e.startMember(ctx, name) })
	}
	wg.Wait()

	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		for _, m := range started {
			if m != nil {
				m.stop()
			}
		}
		return errors.New("start members: environment stopped meanwhile")
	}
	for _, m := range started {
		if m != nil {
			e.members[m.name] = m
			e.order = append(e.order, m.name)
		}
	}
	e.mu.Unlock()
	return errors.Join(errs...)
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

func (e *Env) startEtcd(ctx context.Context) error {
	begin := time.Now()
	preferred := e.ports.etcd()
	for attempt := 1; ; attempt++ {
		ports, err := proc.PreferPorts(preferred)
		if err != nil {
			return err
		}
		preferred = []int{0, 0} // a retry takes fresh ports
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		args := []string{
			"--name=flotilla",
			"--data-dir=" + filepath.Join(e.dir, "etcd"),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=flotilla=" + peer,
			"--log-level=warn",
		}
		if !e.persistent {
			args = append(args, "--unsafe-no-fsync") // throwaway data
		}
		p, err := e.run("etcd", filepath.Join(e.binDir, "etcd"), args, filepath.Join(e.dir, "etcd.log"))
		if err != nil {
			return err
		}
		e.etcd, e.etcdURL = p, client
		err = e.waitReady(ctx, p, "etcd", func(ctx context.Context) error {
			return get(ctx, http.DefaultClient, client+"/health", "")
		})
		if err == nil {
			fmt.Fprintf(e.log, "kube: etcd ready at %s in %s\n", client, time.Since(begin).Round(time.Millisecond))
			go e.watch(p)
			return e.ports.setEtcd(ports[0], ports[1])
		}
		p.stop()
		if attempt == 3 || !p.bindFailed() {
			return err
		}
	}
}

func (e *Env) startMember(ctx context.Context, name string) (*member, error) {
	m := &member{name: name, dir: filepath.Join(e.dir, name), graceful: e.persistent}
	if err := os.MkdirAll(filepath.Join(m.dir, "certs"), 0o755); err != nil {
		return nil, fmt.Errorf("start member %s: %w", name, err)
	}
	// token,user,uid,groups: an administrator, allowed everything through system:masters.
	tokens := filepath.Join(m.dir, "tokens.csv")
	if e.persistent {
		m.token = readToken(tokens)
	}
	if m.token == "" {
		tok := make([]byte, 16)
		rand.Read(tok)
		m.token = hex.EncodeToString(tok)
		if err := os.WriteFile(tokens, []byte(m.token+",admin,admin,system:masters\n"), 0o600); err != nil {
			return nil, fmt.Errorf("start member %s: %w", name, err)
		}
	}

	begin := time.Now()
	preferred := e.ports.member(name)
	for attempt := 1; ; attempt++ {
		ports, err := proc.PreferPorts([]int{preferred})
		if err != nil {
			return nil, fmt.Errorf("start member %s: %w", name, err)
		}
		preferred = 0 // a retry takes a fresh port
		m.url = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		args := []string{
			"--etcd-servers=" + e.etcdURL,
			"--etcd-prefix=/" + name, // members share the etcd, never its keys
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--cert-dir=" + filepath.Join(m.dir, "certs"), // self-signed serving cert, made at start
			"--token-auth-file=" + tokens,
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://" + name + ".flotilla.invalid",
			"--service-account-key-file=" + e.saPub,
			"--service-account-signing-key-file=" + e.saKey,
			"--service-cluster-ip-range=10.0.0.0/24",
			// Without the serviceaccount controller no namespace has a default ServiceAccount,
			// and this plugin would then reject every pod a ReplicaSet creates.
			"--disable-admission-plugins=ServiceAccount",
			"--allow-privileged=true",
			"--profiling=false",
		}
		p, err := e.run(name+"/kube-apiserver", filepath.Join(e.binDir, "kube-apiserver"), args, filepath.Join(m.dir, "kube-apiserver.log"))
		if err != nil {
			return nil, fmt.Errorf("start member %s: %w", name, err)
		}
		m.apiserver = p
		// Until the serving certificate exists there is nothing to verify against.
		insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		err = e.waitReady(ctx, p, name+" kube-apiserver", func(ctx context.Context) error {
			return get(ctx, insecure, m.url+"/readyz", m.token)
		})
		insecure.CloseIdleConnections()
		if err == nil {
			break
		}
		p.stop()
		if attempt == 3 || !p.bindFailed() {
			return nil, fmt.Errorf("start member %s: %w", name, err)
		}
	}
	m.ready = time.Since(begin)
	fmt.Fprintf(e.log, "kube: %s kube-apiserver ready at %s in %s\n", name, m.url, m.ready.Round(time.Millisecond))
	go e.watch(m.apiserver)
	if err := e.ports.setMember(name, port(m.url)); err != nil {
		m.apiserver.stop()
		return nil, fmt.Errorf("start member %s: %w", name, err)
	}

	if err := m.writeKubeconfig(ctx); err != nil {
		m.apiserver.stop()
		return nil, fmt.Errorf("start member %s: %w", name, err)
	}
	if e.controllers != nil {
		args := []string{
			"--kubeconfig=" + m.kubeconfig,
			"--controllers=" + strings.Join(e.controllers, ","),
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
		}
		p, err := e.run(name+"/kube-controller-manager", filepath.Join(e.binDir, "kube-controller-manager"), args,
			filepath.Join(m.dir, "kube-controller-manager.log"))
		if err != nil {
			m.apiserver.stop()
			return nil, fmt.Errorf("start member %s: %w", name, err)
		}
		m.kcm = p
		go e.watch(p)
	}
	return m, nil
}

// writeKubeconfig writes the member's kubeconfig, trusting the serving certificate the API
// server generated, and checks that a client using it gets through.
func (m *member) writeKubeconfig(ctx context.Context) error {
	ca, err := os.ReadFile(filepath.Join(m.dir, "certs", "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("read serving certificate: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[m.name] = &clientcmdapi.Cluster{Server: m.url, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: m.token}
	cfg.Contexts[m.name] = &clientcmdapi.Context{Cluster: m.name, AuthInfo: "admin"}
	cfg.CurrentContext = m.name
	m.kubeconfig = filepath.Join(m.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, m.kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", m.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	// Tests talk to members a lot; client-side throttling would only slow them down.
	rc.QPS, rc.Burst = 200, 400
	m.rest = rc
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return fmt.Errorf("client from kubeconfig: %w", err)
	}
	defer client.CloseIdleConnections()
	if err := get(ctx, client, m.url+"/readyz", ""); err != nil {
		return fmt.Errorf("check kubeconfig %s: %w", m.kubeconfig, err)
	}
	return nil
}

// get succeeds when url answers 200 OK.
func get(ctx context.Context, client *http.Client, url, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// waitReady polls check until it succeeds, the process exits, or the timeout passes, and
// explains a failure with the tail of the process's log.
func (e *Env) waitReady(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before becoming ready (%v); last lines of %s:\n%s",
				what, p.err, p.logPath, proc.Tail(p.logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); last lines of %s:\n%s",
				what, ctx.Err(), last, p.logPath, proc.Tail(p.logPath, 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Members lists the members' names in the order they were started.
func (e *Env) Members() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.order)
}

func (e *Env) member(name string) *member {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.members[name]
}

// Kubeconfig is the path of a kubeconfig for member, as an administrator; "" for an unknown
// member.
func (e *Env) Kubeconfig(member string) string {
	if m := e.member(member); m != nil {
		return m.kubeconfig
	}
	return ""
}

// RESTConfig is a client configuration for member, as an administrator; a new copy on each call,
// so the caller may change it. Nil for an unknown member.
func (e *Env) RESTConfig(member string) *rest.Config {
	if m := e.member(member); m != nil {
		return rest.CopyConfig(m.rest)
	}
	return nil
}

// ReadyTime is how long member's API server took from start to ready.
func (e *Env) ReadyTime(member string) time.Duration {
	if m := e.member(member); m != nil {
		return m.ready
	}
	return 0
}

// Dir is the environment's scratch directory: etcd data, and per member its certificates,
// kubeconfig and process logs (kube-apiserver.log, kube-controller-manager.log).
func (e *Env) Dir() string { return e.dir }

// StopMember stops one member's processes, as if the cluster had gone away. Its kubeconfig
// stays, pointing at nothing.
func (e *Env) StopMember(name string) error {
	e.mu.Lock()
	m := e.members[name]
	if m == nil {
		e.mu.Unlock()
		return fmt.Errorf("stop member %s: no such member", name)
	}
	delete(e.members, name)
	e.order = slices.DeleteFunc(e.order, func(n string) bool { return n == name })
	e.mu.Unlock()
	m.stop()
	return nil
}

func (m *member) stop() {
	if !m.graceful {
		if m.kcm != nil {
			m.kcm.stop()
		}
		m.apiserver.stop()
		return
	}
	if m.kcm != nil {
		m.kcm.stopWith(syscall.SIGTERM, gracePeriod)
	}
	m.apiserver.stopWith(syscall.SIGTERM, gracePeriod)
}

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

// process is one running server.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logf    *os.File
	done    chan struct{} // closed when the process has exited; err is set then
	err     error
	once    sync.Once
}

func (e *Env) run(name, bin string, args []string, logPath string) (*process, error) {
	cmd, logf, err := proc.Command(bin, args, logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "# %s %s\n", bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("run %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logf: logf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop kills the process group at once: everything here is throwaway.
func (p *process) stop() { p.stopWith(syscall.SIGKILL, 0) }

// stopWith sends sig to the process group and kills it if it has not exited within grace.
func (p *process) stopWith(sig syscall.Signal, grace time.Duration) {
	p.once.Do(func() {
		proc.Stop(p.cmd, p.done, sig, grace)
		p.logf.Close()
	})
}

// bindFailed reports whether the process failed because its port was taken after we chose it.
func (p *process) bindFailed() bool {
	return strings.Contains(proc.Tail(p.logPath, 50), "address already in use")
}

// watch reports a process that exits while the environment is running: tests then fail in
// confusing ways, and the log tail says why.
func (e *Env) watch(p *process) {
	<-p.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || p.stoppedOnPurpose() {
		return
	}
	fmt.Fprintf(e.log, "kube: %s exited unexpectedly (%v); last lines of %s:\n%s\n", p.name, p.err, p.logPath, proc.Tail(p.logPath, 20))
}

func (p *process) stoppedOnPurpose() bool {
	stopped := true
	p.once.Do(func() { stopped = false; p.logf.Close() })
	return stopped
}

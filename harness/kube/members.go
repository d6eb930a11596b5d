package kube

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
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

// member is one member cluster: its processes and how to reach it.
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
	if err := e.startAPIServer(ctx, m, e.ports.member(name), false); err != nil {
		return nil, fmt.Errorf("start member %s: %w", name, err)
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

// startAPIServer starts m's kube-apiserver and waits until it is ready. It listens on
// port, or on a free port when port is 0 or, unless samePort, taken; it tries fresh ports up
// to 3 times when the port was taken before the server bound it. The serving certificate in
// m's cert dir is made on the first start and reused after.
func (e *Env) startAPIServer(ctx context.Context, m *member, port int, samePort bool) error {
	for attempt := 1; ; attempt++ {
		ports, err := proc.PreferPorts([]int{port})
		if err != nil {
			return err
		}
		if samePort && ports[0] != port {
			return fmt.Errorf("port %d is taken", port)
		}
		port = ports[0]
		m.url = fmt.Sprintf("https://127.0.0.1:%d", port)
		p, err := e.run(m.name+"/kube-apiserver", filepath.Join(e.binDir, "kube-apiserver"), e.apiserverArgs(m, port),
			filepath.Join(m.dir, "kube-apiserver.log"))
		if err != nil {
			return err
		}
		m.apiserver = p
		// Until the serving certificate exists there is nothing to verify against.
		insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		err = e.waitReady(ctx, p, m.name+" kube-apiserver", func(ctx context.Context) error {
			return get(ctx, insecure, m.url+"/readyz", m.token)
		})
		insecure.CloseIdleConnections()
		if err == nil {
			return nil
		}
		p.stop()
		if samePort || attempt == 3 || !p.bindFailed() {
			return err
		}
		port = 0 // a retry takes a fresh port
	}
}

func (e *Env) apiserverArgs(m *member, port int) []string {
	return []string{
		"--etcd-servers=" + e.etcdURL,
		"--etcd-prefix=/" + m.name, // members share the etcd, never its keys
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(m.dir, "certs"), // self-signed serving cert, made at start
		"--token-auth-file=" + filepath.Join(m.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://" + m.name + ".flotilla.invalid",
		"--service-account-key-file=" + e.saPub,
		"--service-account-signing-key-file=" + e.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// Without the serviceaccount controller no namespace has a default ServiceAccount,
		// and this plugin would then reject every pod a ReplicaSet creates.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--profiling=false",
	}
}

// StopAPIServer kills member's kube-apiserver (SIGKILL), as a control plane that went down:
// clients get connection refused. Its data, certificates, kubeconfig and controller
// manager stay; StartAPIServer brings it back.
func (e *Env) StopAPIServer(name string) error {
	m := e.member(name)
	if m == nil {
		return fmt.Errorf("stop the API server of %s: no such member", name)
	}
	m.apiserver.stop()
	return nil
}

// StartAPIServer starts member's kube-apiserver again after StopAPIServer, on the same port,
// with the same serving certificate and data, so that its kubeconfig stays valid, and waits
// until it is ready. It fails if the port was taken meanwhile.
func (e *Env) StartAPIServer(ctx context.Context, name string) error {
	m := e.member(name)
	if m == nil {
		return fmt.Errorf("start the API server of %s: no such member", name)
	}
	select {
	case <-m.apiserver.done:
	default:
		return fmt.Errorf("start the API server of %s: it is running", name)
	}
	if err := e.startAPIServer(ctx, m, port(m.url), true); err != nil {
		return fmt.Errorf("start the API server of %s: %w", name, err)
	}
	go e.watch(m.apiserver)
	return nil
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

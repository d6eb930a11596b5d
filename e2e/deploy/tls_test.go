package deploy

import (
	"crypto/tls"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/sealing"
)

// natsTLSMount is where the NATS pods mount Secret flotilla-nats-tls (base/nats/nats.yaml).
const natsTLSMount = "/etc/nats-tls/"

// mountNATSTLS does for a NATS configuration written to dir what the pod's volume does: it
// writes the rendered Secret flotilla-nats-tls to dir/tls and points nats.conf there.
func mountNATSTLS(t *testing.T, r rendered, dir string) {
	t.Helper()
	tlsDir := filepath.Join(dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range r.secret(t, "flotilla-nats-tls").Data {
		if err := os.WriteFile(filepath.Join(tlsDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "nats.conf")
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.ReplaceAll(string(data), natsTLSMount, tlsDir+"/"))
	if err := os.WriteFile(conf, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// exampleClientTLS is a client certificate of the example overlay's CA, and the CA: what a
// client of a NATS server started from the example overlay presents and verifies it with.
func exampleClientTLS(t *testing.T) nats.Option {
	t.Helper()
	dir := filepath.Join(repoRoot(t), exampleOverlay, "secrets/tls")
	return func(o *nats.Options) error {
		for _, opt := range []nats.Option{
			nats.RootCAs(filepath.Join(dir, "ca.pem")),
			nats.ClientCert(filepath.Join(dir, "flotilla.pem"), filepath.Join(dir, "flotilla-key.pem")),
		} {
			if err := opt(o); err != nil {
				return err
			}
		}
		return nil
	}
}

// tlsScript runs deploy/tls.sh for members and returns the directory it wrote.
func tlsScript(t *testing.T, members ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	run(t, nil, "bash", append([]string{filepath.Join(repoRoot(t), "deploy/tls.sh"), dir}, members...)...)
	return dir
}

// deploy/tls.sh makes a CA and certificates that a real NATS server and a real PostgreSQL
// accept and verify (the names and addresses they are reached at included), client
// certificates for the control plane and each member, and an encryption key the rollout reads;
// run again, it keeps what exists and adds what is new.
func TestTLSScriptMakesCertificatesThatWork(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("deploy/tls.sh needs openssl: apt-get install -y openssl")
	}
	dir := filepath.Join(t.TempDir(), "tls")
	script := filepath.Join(repoRoot(t), "deploy/tls.sh")
	run(t, nil, "bash", script, dir, "member-1")
	ca := filepath.Join(dir, "ca.pem")
	caBefore, _ := os.ReadFile(ca)
	run(t, nil, "bash", script, dir, "member-1", "eu.west")
	if caAfter, _ := os.ReadFile(ca); string(caAfter) != string(caBefore) {
		t.Error("a second run made a new CA: the certificates signed before would no longer verify")
	}
	for _, f := range []string{"ca-key.pem", "nats-key.pem", "flotilla-key.pem", "apply-eu.west-key.pem", "encryption-keys"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v: want readable by its owner only", f, err, fi.Mode().Perm())
		}
	}
	if _, err := sealing.LoadKeys(filepath.Join(dir, "encryption-keys")); err != nil {
		t.Errorf("the rollout cannot read the encryption key: %v", err)
	}

	srv, err := natsserver.Start(natsserver.Options{StoreDir: t.TempDir(), TLS: &natsserver.TLS{
		CertFile: filepath.Join(dir, "nats.pem"), KeyFile: filepath.Join(dir, "nats-key.pem"), CAFile: ca}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	for _, client := range []string{"flotilla", "apply-member-1", "apply-eu.west"} {
		s := natsconn.Settings{URL: srv.URL(), CA: ca, Cert: filepath.Join(dir, client+".pem"), Key: filepath.Join(dir, client+"-key.pem")}
		nc, err := s.Connect("tls-script-test")
		if err != nil {
			t.Errorf("%s over TLS: %v", client, err)
			continue
		}
		nc.Close()
	}
	if nc, err := (&natsconn.Settings{URL: srv.URL(), CA: ca}).Connect("no-cert", nats.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Error("a client without a certificate connected")
	}

	pg, err := postgres.Start(t.Context(), postgres.Options{TLS: &postgres.TLS{
		CertFile: filepath.Join(dir, "postgres.pem"), KeyFile: filepath.Join(dir, "postgres-key.pem"), RootCert: ca}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop() })
	conn, err := pgx.Connect(t.Context(), pg.URL()) // sslmode=verify-full
	if err != nil {
		t.Fatalf("PostgreSQL with the script's certificate, sslmode=verify-full: %v", err)
	}
	conn.Close(t.Context())
}

// tlsEnv are the NATS TLS settings of a container.
type tlsEnv struct{ url, ca, cert, key string }

func composeTLSEnv(env map[string]*string) tlsEnv {
	get := func(k string) string {
		if v := env[k]; v != nil {
			return *v
		}
		return ""
	}
	return tlsEnv{get(natsconn.EnvURL), get(natsconn.EnvCA), get(natsconn.EnvCert), get(natsconn.EnvKey)}
}

// Every container of the compose stack that talks to NATS does so over TLS with the CA and a
// certificate of its own, and to PostgreSQL with sslmode=verify-full; NATS and PostgreSQL
// require it; every file named is one deploy/tls.sh makes, mounted where it is named.
func TestComposeUsesTLSEverywhere(t *testing.T) {
	p := loadCompose(t)
	nats := p.Services["nats"].Command
	for _, want := range []string{"--tlsverify", "--tlscert", "--tlskey", "--tlscacert"} {
		if !slices.Contains(nats, want) {
			t.Errorf("nats command %v lacks %s", nats, want)
		}
	}
	if pg := strings.Join(p.Services["postgres"].Command, " "); !strings.Contains(pg, "ssl=on") || !strings.Contains(pg, "hba_file=") {
		t.Errorf("postgres command %q: want ssl=on and the stack's pg_hba.conf (TLS only from the network)", pg)
	}
	var members []string
	named := map[string][]string{} // service -> files it names under /tls
	for name, s := range p.Services {
		if s.Build == nil {
			continue
		}
		mounted := slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == "/tls" && v.ReadOnly })
		if !mounted {
			t.Errorf("%s does not mount the TLS files read-only at /tls", name)
		}
		e := composeTLSEnv(s.Environment)
		if !strings.HasPrefix(e.url, "tls://") || e.ca != "/tls/ca.pem" || e.cert == "" || e.key == "" {
			t.Errorf("%s: NATS %+v: want tls:// with the CA, a certificate and its key", name, e)
		}
		named[name] = append(named[name], e.ca, e.cert, e.key)
		switch svc := *s.Build.Args["SERVICE"]; svc {
		case "apply":
			member := flagValue(s.Command, "--cluster")
			members = append(members, member)
			if e.cert != "/tls/apply-"+member+".pem" {
				t.Errorf("%s presents %s: want its member's own certificate", name, e.cert)
			}
		case "scheduler", "rollout", "status":
			db, err := url.Parse(*s.Environment["DATABASE_URL"])
			if err != nil || db.Query().Get("sslmode") != "verify-full" || db.Query().Get("sslrootcert") != "/tls/ca.pem" {
				t.Errorf("%s: DATABASE_URL %v: want sslmode=verify-full and sslrootcert=/tls/ca.pem", name, err)
			}
			if svc == "rollout" {
				k := s.Environment["FLOTILLA_ENCRYPTION_KEY_FILE"]
				if k == nil || *k != "/tls/encryption-keys" {
					t.Errorf("rollout: FLOTILLA_ENCRYPTION_KEY_FILE %v, want /tls/encryption-keys", k)
				}
				named[name] = append(named[name], *k)
			}
		}
	}
	// What the header tells the person to run makes every file named.
	dir := tlsScript(t, members...)
	for service, files := range named {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(f, "/tls/"))); err != nil {
				t.Errorf("%s names %s, which deploy/tls.sh does not make", service, f)
			}
		}
	}
}

// deploymentNATS is how Deployment d reaches NATS server s: its URL with its user, and its
// TLS files (CA, client certificate and key) as the Secrets it mounts hold them.
func deploymentNATS(t *testing.T, r rendered, d appsv1.Deployment, s *server.Server) natsconn.Settings {
	t.Helper()
	env := d.Spec.Template.Spec.Containers[0].Env
	dir := t.TempDir()
	files := map[string]string{}
	for _, k := range []string{natsconn.EnvCA, natsconn.EnvCert, natsconn.EnvKey} {
		v := envValue(env, k)
		if v == "" {
			t.Fatalf("%s: no %s", d.Name, k)
		}
		files[k] = filepath.Join(dir, path.Base(v))
		if err := os.WriteFile(files[k], mountedFile(t, r, d, v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return natsconn.Settings{URL: natsURL(t, r, d, s), CA: files[natsconn.EnvCA], Cert: files[natsconn.EnvCert], Key: files[natsconn.EnvKey]}
}

// secretMounts maps a container's mounted paths to the Secret behind each.
func secretMounts(d appsv1.Deployment) map[string]string {
	spec := d.Spec.Template.Spec
	secrets := map[string]string{}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	out := map[string]string{}
	for _, m := range spec.Containers[0].VolumeMounts {
		if s, ok := secrets[m.Name]; ok {
			out[m.MountPath] = s
		}
	}
	return out
}

// mountedFile finds the rendered Secret and key a container reads at path.
func mountedFile(t *testing.T, r rendered, d appsv1.Deployment, file string) []byte {
	t.Helper()
	secret, ok := secretMounts(d)[path.Dir(file)]
	if !ok {
		t.Errorf("%s: nothing mounted at %s", d.Name, path.Dir(file))
		return nil
	}
	data, ok := r.secret(t, secret).Data[path.Base(file)]
	if !ok {
		t.Errorf("%s: Secret %s has no %s", d.Name, secret, path.Base(file))
	}
	return data
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// The Kubernetes installation's every Deployment reaches NATS over TLS with the CA and a
// client certificate from a Secret it mounts, NATS verifies clients' certificates, and on a
// real NATS server run from the rendered configuration each Deployment connects with its own
// files; the rollout reads the encryption key from a mounted Secret; the database URL
// verifies the server against a mounted CA.
func TestKustomizeUsesTLSEverywhere(t *testing.T) {
	r := render(t, filepath.Join(repoRoot(t), exampleOverlay))
	conf := r.configMap(t, "nats-config").Data["nats.conf"]
	if strings.Count(conf, "verify: true") != 2 {
		t.Errorf("nats.conf: want client and route TLS with verify: true:\n%s", conf)
	}
	opts := natsOptions(t, r)
	if opts.TLSConfig == nil || opts.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Error("the rendered NATS configuration does not require client certificates")
	}
	s := startNATS(t, r)
	deployments := r.deployments(t)
	if len(deployments) < 5 {
		t.Fatalf("%d Deployments rendered", len(deployments))
	}
	for _, d := range deployments {
		t.Run(d.Name, func(t *testing.T) {
			env := d.Spec.Template.Spec.Containers[0].Env
			settings := deploymentNATS(t, r, d, s)
			if !strings.HasPrefix(settings.URL, "tls://") {
				t.Errorf("FLOTILLA_NATS_URL is not tls://")
			}
			nc, err := settings.Connect("kustomize-tls-test", nats.Timeout(10*time.Second))
			if err != nil {
				t.Fatalf("connect with the Deployment's own TLS files: %v", err)
			}
			nc.Close()
			if d.Labels["app.kubernetes.io/component"] != "control-plane" {
				return
			}
			if mountedFile(t, r, d, "/etc/flotilla/postgres/ca.pem") == nil {
				t.Error("no PostgreSQL CA mounted")
			}
			if d.Name == "rollout" {
				keys := mountedFile(t, r, d, envValue(env, "FLOTILLA_ENCRYPTION_KEY_FILE"))
				if _, err := sealing.ParseKeys(keys); err != nil {
					t.Errorf("the rollout's encryption key: %v", err)
				}
			}
		})
	}
	db, err := url.Parse(string(r.secret(t, "flotilla-database").Data["DATABASE_URL"]))
	if err != nil || db.Query().Get("sslmode") != "verify-full" || db.Query().Get("sslrootcert") != "/etc/flotilla/postgres/ca.pem" {
		t.Errorf("DATABASE_URL: want sslmode=verify-full with the mounted CA (%v)", err)
	}
}

package standalone

import (
	"flag"
	"fmt"
	"os"
)

// EnvDataDir gives --data-dir its default.
const EnvDataDir = "FLOTILLA_DATA_DIR"

// RegisterFlags adds the standalone's flags to fs, with defaults from the environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	dataDir := os.Getenv(EnvDataDir)
	if dataDir == "" {
		dataDir = DefaultDataDir
	}
	fs.StringVar(&c.DataDir, "data-dir", dataDir,
		"directory for everything that survives a restart (JetStream, PostgreSQL and member data, kubeconfigs, the log; env "+EnvDataDir+")")
	fs.StringVar(&c.NATSListen, "nats-listen", DefaultNATSListen, "host:port the embedded NATS server listens on (fleetctl's default is 127.0.0.1:4222)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", DefaultMetricsListen, "host:port of every service's Prometheus metrics (/metrics), /healthz and /readyz")
	fs.StringVar(&c.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"),
		"PostgreSQL to use (default $DATABASE_URL); empty starts a local PostgreSQL in <data-dir>/postgres")
	fs.StringVar(&c.KubeconfigDir, "kubeconfig-dir", "", "run an apply worker for each <member>.kubeconfig file in this directory")
	fs.IntVar(&c.LocalMembers, "local-members", 0, "start this many member clusters here, member-1 ... member-N")
	fs.StringVar(&c.KubeBinDir, "kube-bin-dir", "", "directory with etcd, kube-apiserver, kube-controller-manager and kubectl (default $FLOTILLA_KUBE_BIN_DIR, then the make kube-bins cache)")
	fs.BoolVar(&c.SimulatedNodes, "simulated-nodes", true, "give each local member a node that reports its pods running, though no container runs (there is no kubelet), so that Deployments become available")
	fs.BoolVar(&c.Hub, "hub", false, "start a local hub cluster (a kube-apiserver) with the Fleet CRDs, and hubsync: use it with kubectl --kubeconfig <data-dir>/hub.kubeconfig as an upstream Fleet hub")
	fs.BoolVar(&c.Example, "example", false, "apply the quick-start example (deploy/examples/quickstart) and show its placement converge")
	fs.StringVar(&c.ExamplesDir, "examples-dir", "", "directory holding quickstart/ (default deploy/examples here or in a parent directory)")
	fs.BoolVar(&c.NATSTLS, "nats-tls", false, "NATS accepts TCP clients over TLS only, with a client certificate (made in <data-dir>/tls; fleetctl takes them with --nats-ca, --nats-cert and --nats-key)")
	fs.StringVar(&c.EncryptionKeyFile, "encryption-key-file", os.Getenv("FLOTILLA_ENCRYPTION_KEY_FILE"),
		"keys that encrypt Secrets in PostgreSQL (default <data-dir>/encryption-keys, made when missing)")
	fs.IntVar(&c.GCPercent, "gc-percent", 0, fmt.Sprintf("the Go collector's target for the one heap every service shares (0: %d, or $GOGC when set; negative: Go's default)", DefaultGCPercent))
	fs.TextVar(&c.LogLevel, "log-level", c.LogLevel, "level of the services' log in <data-dir>/flotilla.log: debug, info, warn or error")
}

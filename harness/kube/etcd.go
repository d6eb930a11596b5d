package kube

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/flotilla-dev/flotilla/harness/internal/proc"
)

// startEtcd starts the etcd the members share, trying fresh ports when the ones it chose
// were taken meanwhile.
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

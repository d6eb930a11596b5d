// Command kube-member runs one local member cluster in a container, for the compose stack on a
// machine with no registry and no real cluster: harness/kube's etcd, kube-apiserver and
// kube-controller-manager (the binaries hack/kube-bins.sh builds), plus a SimulatedNode so
// that Deployments become available. It keeps its state in --data, so a restarted container
// brings the same cluster back, and writes a kubeconfig for other containers to --kubeconfig:
// server --server, trusting the API server's own serving certificate.
//
// The API server listens on the loopback address (harness/kube's choice); kube-member forwards
// --listen to it, so that the cluster is reachable on the container network. It answers
// 200 on http://127.0.0.1:8081/readyz once the cluster is up and the kubeconfig written.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-dev/flotilla/harness/kube"
)

func main() {
	name := flag.String("name", "member-1", "the member's name")
	data := flag.String("data", "/data", "directory keeping the cluster's state across restarts")
	kubeconfig := flag.String("kubeconfig", "/kubeconfig/kubeconfig", "where to write the kubeconfig other containers use")
	server := flag.String("server", "", "the API server's URL as other containers reach it (default https://NAME:6443)")
	listen := flag.String("listen", ":6443", "address forwarded to the API server")
	health := flag.String("health", ":8081", "address of /readyz")
	flag.Parse()
	if *server == "" {
		*server = "https://" + *name + ":6443"
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *name, *data, *kubeconfig, *server, *listen, *health); err != nil {
		slog.Error("kube-member", "member", *name, "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, name, data, kubeconfig, server, listen, health string) error {
	var ready atomic.Bool
	go serveHealth(ctx, health, &ready)

	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the kube binaries: %w", err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	env, err := kube.Start(startCtx, kube.Options{Members: []string{name}, DataDir: data, BinDir: filepath.Dir(exe), Log: os.Stderr})
	cancel()
	if err != nil {
		return err
	}
	defer env.Stop()

	rc := env.RESTConfig(name)
	local, err := url.Parse(rc.Host)
	if err != nil {
		return fmt.Errorf("API server address %q: %w", rc.Host, err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen for the API server: %w", err)
	}
	defer ln.Close()
	go forward(ctx, ln, local.Host)
	if err := writeKubeconfig(env.Kubeconfig(name), kubeconfig, server); err != nil {
		return err
	}
	node := kube.SimulatedNode{Name: name + "-node"}
	go func() {
		if err := node.Run(ctx, rc); err != nil && ctx.Err() == nil {
			slog.Error("simulated node stopped", "member", name, "err", err)
		}
	}()
	ready.Store(true)
	slog.Info("member ready", "member", name, "server", server, "kubeconfig", kubeconfig)
	<-ctx.Done()
	slog.Info("stopping", "member", name)
	return nil
}

// writeKubeconfig copies harness/kube's kubeconfig with the server other containers reach.
// The API server's self-signed certificate names "kubernetes", not the container's host
// name: clients verify it under that name.
func writeKubeconfig(from, to, server string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
		c.TLSServerName = "kubernetes"
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	// Written whole and renamed: a reader never sees half a file.
	tmp := to + ".tmp"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	// Apply workers run as another user than this container's.
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := os.Rename(tmp, to); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// forward copies each connection accepted on ln to target and back.
func forward(ctx context.Context, ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				slog.Error("accept", "err", err)
			}
			return
		}
		go func() {
			defer c.Close()
			var d net.Dialer
			up, err := d.DialContext(ctx, "tcp", target)
			if err != nil {
				slog.Warn("forward to the API server", "err", err)
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(up, c); done <- struct{}{} }()
			go func() { io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}

func serveHealth(ctx context.Context, addr string, ready *atomic.Bool) {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("health endpoint", "err", err)
	}
}

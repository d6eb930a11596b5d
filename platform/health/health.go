// Package health serves a service's /healthz (the process is alive) and
// /readyz (it can do its work) endpoints for container probes, and its
// Prometheus metrics at /metrics.
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Endpoints are what a health port serves.
type Endpoints struct {
	// Ready reports why the service cannot work yet, or nil.
	Ready func(context.Context) error
	// Metrics, when set, is served at /metrics in the Prometheus text format.
	Metrics prometheus.Gatherer
	// Log receives the metrics that could not be read at a scrape (the others
	// are served); default slog.Default().
	Log *slog.Logger
}

// Serve serves the endpoints on addr until ctx ends.
func Serve(ctx context.Context, addr string, e Endpoints) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health endpoint: %w", err)
	}
	return e.Serve(ctx, ln)
}

// Serve serves the endpoints on ln until ctx ends; it closes ln.
func (e Endpoints) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("health endpoint: %w", err)
	}
	return nil
}

// Handler is the endpoints' HTTP handler.
func (e Endpoints) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if e.Ready != nil {
			if err := e.Ready(r.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ok\n"))
	})
	if e.Metrics != nil {
		log := e.Log
		if log == nil {
			log = slog.Default()
		}
		mux.Handle("/metrics", promhttp.HandlerFor(e.Metrics, promhttp.HandlerOpts{
			// A gauge read from the database or the bus that cannot be read
			// leaves the others to be served.
			ErrorHandling:       promhttp.ContinueOnError,
			ErrorLog:            scrapeLog{log},
			MaxRequestsInFlight: 4,
			Timeout:             30 * time.Second,
		}))
	}
	return mux
}

// scrapeLog passes the metrics handler's errors to a slog.Logger.
type scrapeLog struct{ log *slog.Logger }

func (l scrapeLog) Println(v ...any) { l.log.Warn("metrics scrape: " + fmt.Sprint(v...)) }

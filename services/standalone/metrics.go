package standalone

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flotilla-dev/flotilla/platform/health"
)

// listenMetrics opens the metrics port first, as NATS's: a port in use is
// reported before anything starts.
func (r *runner) listenMetrics() error {
	ln, err := net.Listen("tcp", r.cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("the metrics endpoint cannot listen on %s (%v): is another Flotilla running? Stop it, or pick another address with --metrics-listen", r.cfg.MetricsListen, err)
	}
	r.metricsLn = ln
	r.metricsURL = "http://" + ln.Addr().String() + "/metrics"
	// One registry for every service in the process: each service's metrics carry its
	// service label (the apply workers': service="apply" and their member), and the Go
	// runtime's and the process's are counted once.
	r.metrics = prometheus.NewRegistry()
	r.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return nil
}

// serveMetrics serves /metrics, /healthz and /readyz until ctx ends.
func (r *runner) serveMetrics(ctx context.Context) error {
	return health.Endpoints{
		Ready: func(context.Context) error {
			if !r.running.Load() {
				return errors.New("the services are starting")
			}
			return nil
		},
		Metrics: r.metrics,
		Log:     r.log,
	}.Serve(ctx, r.metricsLn)
}

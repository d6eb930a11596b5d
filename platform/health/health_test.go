package health_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-dev/flotilla/platform/health"
	"github.com/flotilla-dev/flotilla/platform/metrics"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestTheHealthPortServesMetricsAndReadiness(t *testing.T) {
	reg := prometheus.NewRegistry()
	served := prometheus.NewCounter(prometheus.CounterOpts{Name: "flotilla_test_total", Help: "A test counter."})
	served.Add(3)
	reg.MustRegister(served)
	// A gauge read from a database that is down leaves the others to be served.
	reg.MustRegister(metrics.NewGauges(func(context.Context) ([]float64, error) { return nil, errors.New("database down") },
		prometheus.NewDesc("flotilla_test_unreadable", "A gauge that cannot be read.", nil, nil)))
	notReady := errors.New("not connected to NATS")
	var ready atomic.Bool
	srv := httptest.NewServer(health.Endpoints{Ready: func(context.Context) error {
		if !ready.Load() {
			return notReady
		}
		return nil
	}, Metrics: reg}.Handler())
	defer srv.Close()

	code, body := get(t, srv, "/metrics")
	if code != http.StatusOK || !strings.Contains(body, "flotilla_test_total 3") || strings.Contains(body, "flotilla_test_unreadable") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if code, body := get(t, srv, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, notReady.Error()) {
		t.Errorf("/readyz while not ready: %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := get(t, srv, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz when ready: %d", code)
	}
	if code, _ := get(t, srv, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
}

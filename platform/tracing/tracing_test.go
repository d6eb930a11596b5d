package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/flotilla-dev/flotilla/platform/tracing"
)

func TestWithoutAnEndpointNothingIsInstalled(t *testing.T) {
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	before := otel.GetTracerProvider()
	stop, err := tracing.Start(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer stop(context.Background())
	if otel.GetTracerProvider() != before {
		t.Error("a tracer provider was installed without an OTLP endpoint")
	}
	_, span := otel.Tracer("test").Start(t.Context(), "nothing")
	if span.IsRecording() {
		t.Error("a span records without an OTLP endpoint")
	}
}

func TestSpansGoToTheConfiguredEndpoint(t *testing.T) {
	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv(tracing.EnvEndpoint, collector.URL)
	before := otel.GetTracerProvider()
	defer otel.SetTracerProvider(before)

	stop, err := tracing.Start(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(t.Context(), "placement")
	if !span.IsRecording() {
		t.Error("the span does not record")
	}
	span.End()
	if err := stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Error("no spans reached the OTLP endpoint")
	}
}

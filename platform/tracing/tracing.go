// Package tracing sets up OpenTelemetry tracing for a Flotilla process.
//
// Trace context always travels with events (package bus: the CloudEvents
// distributed tracing extension), so one trace follows a placement from
// fleetctl to every member's apply. Spans are recorded and exported only when
// an OTLP endpoint is configured, by the standard environment variables
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, and the
// exporter's other OTEL_EXPORTER_OTLP_* settings; OTEL_TRACES_SAMPLER and
// OTEL_RESOURCE_ATTRIBUTES apply too). Without one nothing is installed: no
// exporter, no network, and the trace ids pass through unchanged.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Environment variables that name an OTLP endpoint.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// Enabled reports whether an OTLP endpoint is configured.
func Enabled() bool {
	return os.Getenv(EnvEndpoint) != "" || os.Getenv(EnvTracesEndpoint) != ""
}

// Start installs the process's global tracer provider, exporting the spans
// of the process named service (its service.name is flotilla-<service>) over
// OTLP/HTTP when an endpoint is configured, and does nothing otherwise. The
// returned stop flushes the spans still held and shuts the exporter down.
func Start(ctx context.Context, service string) (stop func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "flotilla-"+service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

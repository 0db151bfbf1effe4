package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/telemetry"
)

// tracingOn says whether the standard OpenTelemetry environment asks for
// traces: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint without an
// exporter named; never with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none. Tracing is off by default.
func tracingOn(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := getenv("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return false, nil
	case "otlp":
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return false, nil
		}
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: usher exports traces with otlp (or none)", exp)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" && p != "http/protobuf" {
			return false, fmt.Errorf("%s=%q: usher sends OTLP over http/protobuf", name, p)
		}
	}
	return true, nil
}

// startTracing sets up OpenTelemetry tracing from the environment
// (docs/operations.md, "Tracing") for a program named service: an OTLP
// exporter over HTTP, configured by the OTEL_EXPORTER_OTLP_* variables,
// the sampler of OTEL_TRACES_SAMPLER, the resource of OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES. It makes the provider global, so that a
// Worker's handler spans use it, and returns usher's tracer; with tracing
// off it returns a nil tracer and sets nothing. stop flushes the spans.
func startTracing(ctx context.Context, service string) (tracer trace.Tracer, stop func(), err error) {
	on, err := tracingOn(os.Getenv)
	if err != nil || !on {
		return nil, func() {}, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		res, _ = resource.Merge(res, env) // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Tracer(telemetry.TracerName), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx) // spans not sent by now are lost, as the exporter logs
	}, nil
}

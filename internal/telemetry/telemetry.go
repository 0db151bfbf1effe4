// Package telemetry carries W3C trace context through jobs: it reads and
// writes the traceparent a job keeps (docs/operations.md, "Tracing"),
// with the OpenTelemetry API only. The SDK and its exporter are set up
// where the program is assembled (cmd/usher).
package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names usher's tracer, the instrumentation scope of its spans.
const TracerName = "github.com/usherhq/usher"

// Span attributes of a job.
const (
	AttrQueue   = "messaging.destination.name"
	AttrJobID   = "messaging.message.id"
	AttrSystem  = "messaging.system"
	AttrAttempt = "usher.job.attempt"
	AttrAgent   = "usher.agent"
	System      = "usher"
)

var traceContext = propagation.TraceContext{}

// Parse reads a W3C traceparent; false when it does not parse or names
// no valid trace.
func Parse(traceparent string) (trace.SpanContext, bool) {
	if traceparent == "" {
		return trace.SpanContext{}, false
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// Traceparent is the W3C traceparent of ctx's span; "" when ctx holds no
// valid span context.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// WithParent is ctx with traceparent as its remote parent span, or ctx
// itself when traceparent does not parse.
func WithParent(ctx context.Context, traceparent string) context.Context {
	sc, ok := Parse(traceparent)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Inject writes ctx's trace context into HTTP-style headers.
func Inject(ctx context.Context, h propagation.TextMapCarrier) { traceContext.Inject(ctx, h) }

// Extract reads a trace context from HTTP-style headers into ctx.
func Extract(ctx context.Context, h propagation.TextMapCarrier) context.Context {
	return traceContext.Extract(ctx, h)
}

package jobsapi

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/telemetry"
	"github.com/usherhq/usher/jobtype"
)

// The server's spans of jobs (docs/operations.md, "Tracing"): an enqueue
// is a child of the request's trace context (its traceparent header, else
// its first job's); a lease and a completion are children of the job's own.

// enqueueSpan starts the span of an enqueue request; end closes it with
// the new jobs' ids or the error.
func (a *api) enqueueSpan(r *http.Request, specs []jobtype.JobSpec) (context.Context, func([]string, error)) {
	if a.Tracer == nil {
		return r.Context(), func([]string, error) {}
	}
	ctx := telemetry.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if !trace.SpanContextFromContext(ctx).IsValid() && len(specs) > 0 {
		ctx = telemetry.WithParent(ctx, specs[0].Traceparent)
	}
	attrs := []attribute.KeyValue{attribute.String(telemetry.AttrSystem, telemetry.System), attribute.Int("usher.jobs", len(specs))}
	if len(specs) > 0 {
		attrs = append(attrs, attribute.String(telemetry.AttrQueue, specs[0].Queue))
	}
	ctx, span := a.Tracer.Start(ctx, "usher.enqueue", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, func(ids []string, err error) {
		if len(ids) > 0 {
			span.SetAttributes(attribute.String(telemetry.AttrJobID, ids[0]))
		}
		endSpan(span, err)
	}
}

// leaseSpans records a span for each leased job that carries a trace.
func (a *api) leaseSpans(r *http.Request, agent string, leased []jobtype.LeasedJob) {
	if a.Tracer == nil {
		return
	}
	for _, j := range leased {
		if j.Traceparent == "" {
			continue
		}
		_, span := a.Tracer.Start(telemetry.WithParent(r.Context(), j.Traceparent), "usher.lease",
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(jobAttrs(j.Queue, j.ID, j.Attempt, agent)...))
		span.End()
	}
}

// completeSpans reads the trace of each reported job before the engine
// forgets it; end records a span for each, with what the report did.
func (a *api) completeSpans(r *http.Request, agent string, results []jobtype.Result) func([]jobtype.Ack, error) {
	if a.Tracer == nil || len(results) == 0 {
		return func([]jobtype.Ack, error) {}
	}
	ids := make([]string, len(results))
	for i, res := range results {
		ids[i] = res.ID
	}
	traces := a.Engine.Traceparents(ids)
	if len(traces) == 0 {
		return func([]jobtype.Ack, error) {}
	}
	start := time.Now()
	return func(acks []jobtype.Ack, err error) {
		for i, res := range results {
			tp, ok := traces[res.ID]
			if !ok {
				continue
			}
			attrs := append(jobAttrs("", res.ID, res.Attempt, agent), attribute.Bool("usher.job.succeeded", res.Succeeded()))
			if i < len(acks) {
				attrs = append(attrs, attribute.Bool("usher.job.retrying", acks[i].Retrying), attribute.Bool("usher.report.ignored", acks[i].Ignored))
			}
			_, span := a.Tracer.Start(telemetry.WithParent(r.Context(), tp), "usher.complete", trace.WithTimestamp(start),
				trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			endSpan(span, err)
		}
	}
}

func jobAttrs(queue, id string, attempt int, agent string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(telemetry.AttrSystem, telemetry.System),
		attribute.String(telemetry.AttrJobID, id), attribute.Int(telemetry.AttrAttempt, attempt),
		attribute.String(telemetry.AttrAgent, agent)}
	if queue != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrQueue, queue))
	}
	return attrs
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

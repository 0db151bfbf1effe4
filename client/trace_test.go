package client_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/telemetry"
)

// One job forms one trace: the caller's span, the server's enqueue (a
// child through the request's traceparent header), lease and complete,
// and the handler's span (children of the trace the job carries), with
// the handler's own span inside it.
func TestJobTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	srv := jobsapitest.StartWith(t, jobsapitest.Options{Tracer: tp.Tracer(telemetry.TracerName)})
	c := client.New(srv.URL, srv.AdminToken)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	ctx, caller := tp.Tracer("test").Start(t.Context(), "caller")
	ids, err := c.Enqueue(ctx, client.JobSpec{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]
	caller.End()
	if j, err := c.Job(t.Context(), id); err != nil || j.Traceparent != telemetry.Traceparent(ctx) {
		t.Fatalf("job %s carries traceparent %q, %v; want the caller's %q", id, j.Traceparent, err, telemetry.Traceparent(ctx))
	}
	w := &client.Worker{Client: c, TracerProvider: tp, Handlers: map[string]client.Handler{
		"q": func(ctx context.Context, job *client.LeasedJob) (string, error) {
			_, inner := tp.Tracer("test").Start(ctx, "inner")
			inner.End()
			return "", nil
		}}}
	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	waitJob(t, c, id, finished)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
	}
	root := caller.SpanContext()
	for name, parent := range map[string]string{"usher.enqueue": "caller", "usher.lease": "caller",
		"process q": "caller", "inner": "process q", "usher.complete": "caller"} {
		s, ok := spans[name]
		if !ok {
			t.Errorf("no span %q among %d", name, len(spans))
			continue
		}
		if s.SpanContext.TraceID() != root.TraceID() {
			t.Errorf("span %q is in trace %s; want the caller's %s", name, s.SpanContext.TraceID(), root.TraceID())
		}
		if s.Parent.SpanID() != spans[parent].SpanContext.SpanID() {
			t.Errorf("span %q's parent is %s; want %q (%s)", name, s.Parent.SpanID(), parent, spans[parent].SpanContext.SpanID())
		}
	}
	attrs := map[string]string{}
	for _, kv := range spans["process q"].Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs[telemetry.AttrQueue] != "q" || attrs[telemetry.AttrJobID] != id || attrs[telemetry.AttrAttempt] != "1" {
		t.Errorf("the handler's span has attributes %v; want queue q, id %s, attempt 1", attrs, id)
	}
	if k := spans["process q"].SpanKind; k != trace.SpanKindConsumer {
		t.Errorf("the handler's span is of kind %v; want consumer", k)
	}
	// A job that brings a trace of its own keeps it; the enqueue's span
	// still follows the request's header, the caller's context.
	_, elsewhere := tp.Tracer("test").Start(context.Background(), "elsewhere")
	own := telemetry.Traceparent(trace.ContextWithSpan(context.Background(), elsewhere))
	exp.Reset()
	ids, err = c.Enqueue(ctx, client.JobSpec{Queue: "q", Traceparent: own})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := c.Job(t.Context(), ids[0]); err != nil || j.Traceparent != own {
		t.Fatalf("job %s carries %q, %v; want its own %q", ids[0], j.Traceparent, err, own)
	}
	if got := exp.GetSpans(); len(got) != 1 || got[0].Name != "usher.enqueue" || got[0].Parent.SpanID() != root.SpanID() {
		t.Fatalf("spans of the second enqueue = %+v; want usher.enqueue, a child of the caller", got)
	}
}

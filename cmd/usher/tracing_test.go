package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/testwait"
)

// The OTEL_* environment turns tracing on or off, as OpenTelemetry's
// specification says, and refuses what usher cannot do.
func TestTracingOn(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		on   bool
		fail string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, fail: "usher exports traces with otlp"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, fail: "http/protobuf"},
	} {
		on, err := tracingOn(func(k string) string { return tc.env[k] })
		if on != tc.on || (err == nil) != (tc.fail == "") || (err != nil && !strings.Contains(err.Error(), tc.fail)) {
			t.Errorf("%v: on %v, %v; want %v, error %q", tc.env, on, err, tc.on, tc.fail)
		}
	}
}

// otlpReceiver stands in for an OpenTelemetry collector (none is packaged
// for the test machine): it decodes what arrives at /v1/traces.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string]string // span name → trace id (hex)
	svc   map[string]bool   // service.name values seen
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				o.svc[kv.Value.GetStringValue()] = true
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans[s.Name] = hexID(s.TraceId)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(nil)
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// `usher agent` with an OTLP endpoint in its environment exports the
// handler's span in the trace the job carries, and hands the command
// that trace as TRACEPARENT.
func TestAgentExportsTraces(t *testing.T) {
	recv := &otlpReceiver{spans: map[string]string{}, svc: map[string]bool{}}
	collector := httptest.NewServer(recv)
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	srv, c := agentServer(t, "q")
	startAgent(t, srv, "--queue", "q", "--", "sh", "-c", `echo "$TRACEPARENT"`)
	traceID := "0af7651916cd43dd8448eb211c80319c"
	ids := enqueueJobs(t, c, client.JobSpec{Queue: "q", TimeoutMs: 30000, Traceparent: "00-" + traceID + "-b7ad6b7169203331-01"})
	j := waitFinished(t, c, ids[0])
	if j.State != client.StateSucceeded || !strings.HasPrefix(j.Output, "00-"+traceID+"-") {
		t.Fatalf("job %s: %s with output %q; want TRACEPARENT in trace %s", j.ID, j.State, j.Output, traceID)
	}
	testwait.Eventually(t, 30*time.Second, func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		return recv.spans["process q"] == traceID && recv.svc["usher-agent"]
	}, "the collector receiving the handler's span")
}

package jobsapi_test

import (
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
)

// Any body sent to the submitting endpoints gets 201 or a 4xx with an
// error text, never a 5xx, and leaves the core's invariants whole.
func FuzzSubmitBodies(f *testing.F) {
	for _, seed := range []string{
		`{"jobs":[{"queue":"q"}]}`,
		`{"jobs":[{"queue":"q","tier":"default","keys":["net:a"],"group":"g","mode":"read","priority":-5}]}`,
		`{"jobs":[{"queue":"q","after":["1"]},{"queue":"q","retry":{"maxAttempts":3,"backoffMs":10}}]}`,
		`{"jobs":[{"queue":"q","timeoutMs":-1}]}`,
		`{"jobs":[{"queue":"q","backoff":{"policy":"linear","baseMs":5,"maxMs":4}}]}`,
		`{"jobs":[{"queue":"q","retry":{"maxAttempts":2,"backoff":{"policy":"constant","baseMs":9e18}}}]}`,
		`{"name":"w","jobs":[{"name":"a","queue":"q"},{"name":"b","queue":"q","after":["a"]}],"edges":[{"from":"b","to":"a"}]}`,
		`{"jobs":[{"queue":"q","payload":"\u0000\ud800"}]}`,
		`{"jobs":[{"queue":"q","idempotencyKey":"k"},{"queue":"q","idempotencyKey":"k"},{"queue":"q","idempotencyKey":""}]}`,
		`{"jobs":[{"queue":"q","payload":{"b":1,"a":[1.50,2]},"unique":{"byArgs":true,"byPeriodMs":1000,"states":["queued","running"]}}]}`,
		`{"jobs":[{"queue":"q","unique":{"states":["done"],"byPeriodMs":-1}}]}`,
		`{"name":"w","jobs":[{"name":"a","queue":"q","idempotencyKey":"k","unique":{}}]}`,
		`{"jobs":[{"queue":"q","runAt":"2030-01-02T03:04:05Z","deadline":"2030-01-02T04:04:05+01:00"}]}`,
		`{"jobs":[{"queue":"q","delayMs":1000,"deadline":"1999-01-01T00:00:00Z"},{"queue":"q","runAt":"x"}]}`,
		`{"name":"w","jobs":[{"name":"a","queue":"q","delayMs":-3},{"name":"b","queue":"q","runAt":7,"after":["a"]}]}`,
		`[`, `{}`, `null`, `{"jobs":null}`,
	} {
		f.Add([]byte(seed))
	}
	s := jobsapitest.Start(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if status, out := call(t, s, s.AdminToken, "POST", "/v1/queues", map[string]any{"name": "q"}); status != 201 && status != 409 {
			t.Fatalf("queue: %d %v", status, out)
		}
		for _, path := range []string{"/v1/jobs", "/v1/workflows"} {
			status, out := call(t, s, s.AdminToken, "POST", path, body)
			if status != 201 && (status < 400 || status >= 500 || out["error"] == "") {
				t.Fatalf("POST %s %q = %d %v; want 201 or a 4xx with an error", path, body, status, out)
			}
		}
		if err := s.Engine.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

// Any completion or progress body gets 200 or a 4xx with an error text,
// never a 5xx, and leaves the core's invariants whole.
func FuzzAgentReports(f *testing.F) {
	for _, seed := range []string{
		`{"agent":"a","results":[{"id":"1","attempt":1,"exitCode":0,"snoozeMs":5}]}`,
		`{"agent":"a","results":[{"id":"1","attempt":1,"exitCode":1,"cancel":true,"error":"x"}]}`,
		`{"agent":"a","results":[{"id":"1","attempt":1,"result":{"a":[1,2]}}]}`,
		`{"agent":"a","results":[{"id":"1","attempt":1,"snoozeMs":-1}]}`,
		`{"agent":"a","id":"1","attempt":1,"value":0.5,"message":"m"}`,
		`{"agent":"a","id":"1","attempt":1,"value":2}`,
		`{"agent":"a","id":"1","attempt":1,"value":"NaN"}`,
	} {
		f.Add([]byte(seed))
	}
	s := jobsapitest.Start(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if status, out := call(t, s, s.AdminToken, "POST", "/v1/queues", map[string]any{"name": "q", "retry": map[string]any{"maxAttempts": 3}}); status != 201 && status != 409 {
			t.Fatalf("queue: %d %v", status, out)
		}
		enqueue(t, s, map[string]any{"queue": "q"})
		lease(t, s, "a", nil, 1, 1)
		for _, path := range []string{"/v1/agent/complete", "/v1/agent/progress"} {
			status, out := call(t, s, s.AdminToken, "POST", path, body)
			if status != 200 && (status < 400 || status >= 500 || out["error"] == "") {
				t.Fatalf("POST %s %q = %d %v; want 200 or a 4xx with an error", path, body, status, out)
			}
		}
		if err := s.Engine.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

package redisq

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/jobtype"
)

// sampleDashboard is a leader's document with something in every table.
func sampleDashboard() dashboard.Dashboard {
	wait := int64(1500)
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return dashboard.Dashboard{
		State: dashboard.State{
			Time:     at,
			Tiers:    []dashboard.Tier{{Name: "fast", DurationMS: 3000, Running: 1, Counted: 2, Limit: 2}},
			Queue:    []dashboard.QueuedTask{{ID: "7", Class: "slow", Position: 0, EstimateMS: &wait}},
			Running:  []dashboard.RunningTask{{ID: "5", Class: "default", Tier: "fast", Backend: "2", StartedAt: at}},
			Backends: []dashboard.Backend{{ID: "2", State: "busy"}},
			Events:   []dashboard.Event{{Time: at, Kind: "downgrade", Task: "5", Detail: "slow → fast"}},
		},
		Jobs:   jobtype.Stats{Queues: []jobtype.QueueStats{{Name: "scan", Queued: 3}}},
		Leader: &dashboard.Leader{Node: "sched-a", Token: "4:sched-a"},
	}
}

func TestParseDashboardRoundTrip(t *testing.T) {
	want := sampleDashboard()
	b, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseDashboard(b)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := got.Encode()
	if !bytes.Equal(again, b) {
		t.Fatalf("round trip changed the document:\n%s\n%s", b, again)
	}
	if got.Leader.Node != "sched-a" || *got.Queue[0].EstimateMS != 1500 || got.Jobs.Queues[0].Name != "scan" {
		t.Fatalf("parsed %+v", got)
	}
}

// A value that is not a leader's document is refused with ErrBadDashboard,
// never taken for an empty deployment.
func TestParseDashboardRefusesForeignValues(t *testing.T) {
	valid, _ := sampleDashboard().Encode()
	swap := func(old, new string) []byte { return bytes.Replace(valid, []byte(old), []byte(new), 1) }
	for _, tc := range []struct {
		name  string
		value []byte
	}{
		{"empty", nil},
		{"not JSON", []byte("garbage")},
		{"a JSON array", []byte(`[1,2]`)},
		{"an empty object", []byte(`{}`)},
		{"truncated", valid[:len(valid)/2]},
		{"no leader", swap(`"leader":{"node":"sched-a","token":"4:sched-a"}`, `"leader":null`)},
		{"no time", swap(`"time":"2025-01-02T03:04:05Z"`, `"time":"0001-01-01T00:00:00Z"`)},
		{"token of another node", swap(`"token":"4:sched-a"`, `"token":"4:sched-b"`)},
		{"token without epoch", swap(`"token":"4:sched-a"`, `"token":"sched-a"`)},
		{"token with epoch 0", swap(`"token":"4:sched-a"`, `"token":"0:sched-a"`)},
		{"a queue server's no-data state", swap(`"leader":{`, `"noData":"x","leader":{`)},
		{"a table of the wrong type", swap(`"tiers":[`, `"tiers":7,"x":[`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDashboard(tc.value)
			if !errors.Is(err, ErrBadDashboard) {
				t.Fatalf("ParseDashboard(%q) = %+v, %v; want ErrBadDashboard", tc.value, d, err)
			}
		})
	}
}

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		token string
		epoch int64
		node  string
		ok    bool
	}{
		{"1:n1", 1, "n1", true},
		{"12:host-7:x", 12, "host-7:x", true},
		{"", 0, "", false},
		{"n1", 0, "", false},
		{"1:", 0, "", false},
		{"-1:n1", 0, "", false},
		{"x:n1", 0, "", false},
	} {
		epoch, node, err := ParseToken(tc.token)
		if (err == nil) != tc.ok || epoch != tc.epoch || node != tc.node {
			t.Errorf("ParseToken(%q) = %d, %q, %v", tc.token, epoch, node, err)
		}
	}
}

// FuzzParseDashboard: any value read back from scheduler.dashboard is
// either refused with ErrBadDashboard or a document that names its leader
// consistently and encodes to a value that parses the same.
func FuzzParseDashboard(f *testing.F) {
	valid, _ := sampleDashboard().Encode()
	f.Add(valid)
	f.Add([]byte(`{"time":"2025-01-02T03:04:05Z","leader":{"node":"n","token":"1:n"}}`))
	f.Add([]byte(`{"time":"2025-01-02T03:04:05Z","leader":{"node":"n","token":"1:n"},"queue":[{"estimateMs":null}]}`))
	f.Add([]byte(`garbage`))
	f.Add([]byte(`{"leader":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDashboard(b)
		if err != nil {
			if !errors.Is(err, ErrBadDashboard) {
				t.Fatalf("ParseDashboard(%q): %v, not ErrBadDashboard", b, err)
			}
			return
		}
		if _, node, err := ParseToken(d.Leader.Token); err != nil || node != d.Leader.Node || d.NoData != "" {
			t.Fatalf("accepted %q with leader %+v, noData %q", b, d.Leader, d.NoData)
		}
		enc, err := d.Encode()
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", b, err)
		}
		again, err := ParseDashboard(enc)
		if err != nil {
			t.Fatalf("re-encoded %q does not parse: %v", enc, err)
		}
		if enc2, _ := again.Encode(); !bytes.Equal(enc, enc2) || !strings.Contains(string(enc), d.Leader.Token) {
			t.Fatalf("unstable round trip:\n%s\n%s", enc, enc2)
		}
	})
}

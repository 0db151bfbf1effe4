package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/asyclient"
)

// Behind a load balancer a user reaches any queue server: a share made
// on one opens on another, and a result computed through one is answered
// by another from the shared result cache, without running asy again (the
// only backend is gone by then).
func TestSharesAndResultsAcrossQueueServers(t *testing.T) {
	t.Parallel()
	d := newSingleRedis(t)
	d.startScheduler("sched-1")
	backend := d.startBackend("backend-1")
	a := d.startFront("front-a", "--cache-bytes", "8MiB")
	b := d.startFront("front-b", "--cache-bytes", "8MiB")
	d.waitLeader(10*time.Second, "")
	d.waitBackends(1)

	t.Run("share", func(t *testing.T) {
		body := `{"files":[{"filename":"main.asy","main":true,"content":"draw(unitcircle);"}]}`
		resp, err := http.Post(a.base+"/api/shares", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var made struct{ ID string }
		_ = json.NewDecoder(resp.Body).Decode(&made)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /api/shares on A: %d", resp.StatusCode)
		}
		resp, err = http.Get(b.base + "/api/shares/" + made.ID)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/shares/%s on B: %d, want 200", made.ID, resp.StatusCode)
		}
	})

	t.Run("result", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		files := []asyclient.File{{Name: "main.asy", Data: []byte("draw((0,0)--(3,2), red); // shared cache\n"), Main: true}}
		first, err := asyclient.Compile(ctx, a.asyURL(), files, asyclient.Options{Format: "svg"})
		if err != nil {
			t.Fatal(err)
		}
		want := resultOf(t, first)
		backend.Kill() // nothing can run asy now
		again, err := asyclient.Compile(ctx, b.asyURL(), files, asyclient.Options{Format: "svg"})
		if err != nil {
			t.Fatalf("the same task on B with no backend left: %v (a cache miss waits for a backend)", err)
		}
		if got := resultOf(t, again); !bytes.Equal(got, want) {
			t.Fatalf("B answered %d bytes, A computed %d", len(got), len(want))
		}
		if done := again[len(again)-1]; !done.Success || done.Time != first[len(first)-1].Time {
			t.Fatalf("B's complete = %+v, want success with A's run time %v", done, first[len(first)-1].Time)
		}
	})
}

// resultOf returns the svg of a successful task's messages.
func resultOf(t *testing.T, msgs []asyclient.Message) []byte {
	t.Helper()
	var out []byte
	for _, m := range msgs {
		if m.Verb == "result" {
			out = m.Payload
		}
	}
	if last := msgs[len(msgs)-1]; !last.Success || len(out) == 0 {
		t.Fatalf("task ended %+v with %d result bytes", last, len(out))
	}
	return out
}

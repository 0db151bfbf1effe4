package e2etest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A render API result made on one queue server is served by another: its
// source is in Redis, and with the result cache off the second server
// computes it again on its own backends.
func TestRenderResultIDServedByAnotherQueueServer(t *testing.T) {
	t.Parallel()
	d := newSingleRedis(t)
	d.startScheduler("sched-1")
	d.startBackend("backend-1")
	a, b := d.startFront("front-a"), d.startFront("front-b")
	d.waitLeader(10*time.Second, "")
	d.waitBackends(1)

	resp, err := http.Post(a.base+"/api/render?format=svg", "text/plain", strings.NewReader("size(2cm); draw(unitcircle);\n"))
	if err != nil {
		t.Fatal(err)
	}
	made, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	loc := resp.Header.Get("Content-Location")
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(made, []byte("<?xml")) || loc == "" {
		t.Fatalf("POST on A: %d, Content-Location %q: %.200s", resp.StatusCode, loc, made)
	}
	for _, f := range []*front{b, a} {
		got, err := http.Get(f.base + loc)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(got.Body)
		got.Body.Close()
		if got.StatusCode != http.StatusOK || !bytes.Equal(body, made) || got.Header.Get("ETag") != resp.Header.Get("ETag") {
			t.Fatalf("GET %s on %s: %d, same bytes %t, ETag %q want %q", loc, f.base, got.StatusCode,
				bytes.Equal(body, made), got.Header.Get("ETag"), resp.Header.Get("ETag"))
		}
	}
	unknown, err := http.Get(b.base + "/api/render/" + strings.Repeat("0", 64) + ".svg")
	if err != nil {
		t.Fatal(err)
	}
	unknown.Body.Close()
	if unknown.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown id on B: %d", unknown.StatusCode)
	}
}

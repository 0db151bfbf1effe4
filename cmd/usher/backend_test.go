package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/testwait"
)

// unusedStarter is a FAKE runner for tests that start no task: the command
// wiring is under test, not asy. Starting a task through it fails the test.
type unusedStarter struct{ t *testing.T }

func (u unusedStarter) Start(context.Context, sandbox.Task, sandbox.Sink) (backend.Execution, error) {
	u.t.Error("a task was started")
	return nil, errors.New("unused")
}

// The command refuses to start, with the runner's own error, when the
// sandbox does not work; it never listens.
func TestBackendRefusesWithoutSandbox(t *testing.T) {
	runnerErr := errors.New("bubblewrap cannot create a user namespace: install the Debian package bubblewrap")
	listened := false
	o := testBackendOptions(t, func(sandbox.Config) (backend.Starter, error) { return nil, runnerErr })
	o.onListen = func(net.Addr) { listened = true }
	err := o.run(context.Background(), io.Discard)
	if !errors.Is(err, runnerErr) || err.Error() != "backend: "+runnerErr.Error() {
		t.Fatalf("run = %v, want the runner's error after the role's name", err)
	}
	if listened {
		t.Fatal("listened although the sandbox does not work")
	}
}

// Every limit flag (and its environment variable) reaches the runner's
// configuration; sizes take suffixes.
func TestBackendFlagsReachTheRunner(t *testing.T) {
	t.Setenv("USHER_BACKEND_PROCESSES", "17")
	t.Setenv("USHER_BACKEND_OPEN_FILES", "99") // the flag wins over the environment
	var got sandbox.Config
	cmd := backendCommand(&backendOptions{newStarter: func(cfg sandbox.Config) (backend.Starter, error) {
		got = cfg
		return nil, errors.New("stop here")
	}})
	cmd.SetArgs([]string{"--address-space", "1GiB", "--cpu-time", "3s", "--file-size", "10M", "--open-files", "32",
		"--output-limit", "512KiB", "--image-limit", "8MiB", "--max-timeout", "30s", "--interactive-idle", "1m",
		"--max-files", "16", "--max-upload", "2MiB", "--insecure", "--work-root", "/var/tmp"})
	cmd.SetErr(io.Discard)
	cmd.SetContext(context.Background())
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "stop here") {
		t.Fatalf("execute = %v", err)
	}
	want := sandbox.Config{
		Limits: sandbox.Limits{AddressSpace: 1 << 30, CPUTime: 3 * time.Second, FileSize: 10_000_000, Processes: 17,
			OpenFiles: 32, Output: 512 << 10, Image: 8 << 20, MaxTimeout: 30 * time.Second, InteractiveIdle: time.Minute,
			Files: 16, Upload: 2 << 20},
		WorkRoot: "/var/tmp", Insecure: true,
	}
	got.Logger = nil
	if got != want {
		t.Fatalf("runner config\n got %+v\nwant %+v", got, want)
	}
}

// Sizes: plain bytes and every suffix; garbage and negative values refused.
func TestByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true}, {"64KiB", 64 << 10, true}, {"3MiB", 3 << 20, true}, {"2GiB", 2 << 30, true},
		{"5K", 5000, true}, {"5M", 5_000_000, true}, {"1G", 1_000_000_000, true}, {"12B", 12, true}, {"0", 0, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5MiB", 0, false}, {"MiB", 0, false}, {"1TiB", 0, false}, {"9999999999G", 0, false},
	}
	for _, tt := range tests {
		var b byteSize
		err := b.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && int64(b) != tt.want) {
			t.Errorf("Set(%q) = %d, %v; want %d ok=%v", tt.in, b, err, tt.want, tt.ok)
		}
	}
}

// The command listens, answers the probes, and returns cleanly when its
// context ends.
func TestBackendServesAndStops(t *testing.T) {
	o := testBackendOptions(t, func(sandbox.Config) (backend.Starter, error) { return unusedStarter{t}, nil })
	o.files, o.upload = 4, 1<<20
	addr := make(chan net.Addr, 1)
	o.onListen = func(a net.Addr) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- o.run(ctx, &log) }()
	base := "http://" + (<-addr).String()
	for path, want := range map[string]int{"/livez": 200, "/readyz": 200, "/": http.StatusUpgradeRequired} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	cancel()
	if err := testwait.Receive(t, 30*time.Second, done, "the command returning after its context ended"); err != nil {
		t.Fatalf("run = %v", err)
	}
	if !strings.Contains(log.String(), "backend: listening") || !strings.Contains(log.String(), "backend: shutting down") {
		t.Fatalf("log lacks start or stop:\n%s", log.String())
	}
}

func testBackendOptions(t *testing.T, newStarter func(sandbox.Config) (backend.Starter, error)) *backendOptions {
	t.Helper()
	o := &backendOptions{}
	backendCommand(o) // sets the flag defaults
	o.newStarter = newStarter
	o.listen = "127.0.0.1:0"
	o.drain = 5 * time.Second
	return o
}

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
	"github.com/usherhq/usher/internal/testwait"
)

// `usher backend --redis` registers, takes a task the test puts in Redis
// as the queue server and the scheduler would, runs it in the real sandbox
// for the queue server that attaches to the published URL, and
// deregisters when its context ends.
func TestBackendRedisRunsATaskPlayingTheScheduler(t *testing.T) {
	srv := redistest.Start(t)
	o := testBackendOptions(t, sandboxStarter)
	o.sandbox.workRoot = sandboxtest.WorkRoot(t)
	o.redis, o.heartbeatTTL = srv.URL(), 3*time.Second
	addr := make(chan net.Addr, 1)
	o.onListen = func(a net.Addr) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- o.run(ctx, io.Discard) }()
	var base string
	select {
	case a := <-addr:
		base = a.String()
	case err := <-done:
		t.Fatalf("run = %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	if got := rdb.SMembers(ctx, keys.BackendSet()).Val(); len(got) != 1 || got[0] != "1" {
		t.Fatalf("backend.set = %v, want [1]", got)
	}
	if resp, err := http.Get("http://" + base + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	url := scheduleFigure(t, rdb, keys)
	if !strings.HasPrefix(url, "ws://"+base+"/task/") {
		t.Fatalf("address %q, want ws://%s/task/TOKEN", url, base)
	}
	e, err := (&backend.Remote{URL: url, Attached: true}).Start(ctx, sandbox.Task{}, discardSink{})
	if err != nil {
		t.Fatal(err)
	}
	if out := e.Wait(); !out.Success {
		t.Fatalf("outcome %+v", out)
	}
	if got, err := rdb.BLPop(ctx, 10*time.Second, keys.Finished()).Result(); err != nil || got[1] != "1" {
		t.Fatalf("queue.finished: %v %v", got, err)
	}
	cancel()
	if err := testwait.Receive(t, 30*time.Second, done, "the command returning after its context ended"); err != nil {
		t.Fatalf("run = %v", err)
	}
	if got := rdb.SMembers(context.Background(), keys.BackendSet()).Val(); len(got) != 0 {
		t.Fatalf("backend.set after shutdown = %v", got)
	}
}

// scheduleFigure puts task 1 in Redis and XADDs it, as the queue server
// and the scheduler would, and waits for the backend's address.
func scheduleFigure(t *testing.T, rdb *redis.Client, keys redisq.Keys) string {
	t.Helper()
	ctx := context.Background()
	opts := redisq.TaskOptions{Format: sandbox.FormatSVG, Main: "fig.asy"}
	rdb.HSet(ctx, keys.Task("1"), opts.Fields())
	rdb.HSet(ctx, keys.TaskFiles("1"), "fig.asy", "draw(unitcircle);\n")
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Outcoming(), Values: map[string]any{"task": "1"}})
	got, err := rdb.BLPop(ctx, 30*time.Second, keys.TaskBackend("1")).Result()
	if err != nil {
		t.Fatalf("no address: %v", err)
	}
	return got[1]
}

type discardSink struct{}

func (discardSink) Output(string, []byte) error { return nil }
func (discardSink) Result(string, []byte) error { return nil }

// Redis mode refuses, with a clear error and without registering, an
// address queue servers cannot dial and a Redis it cannot reach.
func TestBackendRedisRefusesBadSetup(t *testing.T) {
	srv := redistest.Start(t)
	tests := []struct {
		name, listen, advertise, redis, want string
	}{
		{"unspecified listen host", "0.0.0.0:0", "", srv.URL(), "set --advertise"},
		{"advertise without port", "127.0.0.1:0", "backend-1", srv.URL(), "not host:port"},
		{"no redis", "127.0.0.1:0", "", "redis://127.0.0.1:1", "redis"},
		{"bad redis URL", "127.0.0.1:0", "", "http://%zz", "redis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testBackendOptions(t, func(sandbox.Config) (backend.Starter, error) { return unusedStarter{t}, nil })
			o.listen, o.advertise, o.redis = tt.listen, tt.advertise, tt.redis
			err := o.run(context.Background(), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run = %v, want an error with %q", err, tt.want)
			}
		})
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if n := rdb.Exists(context.Background(), redisq.NewKeys(redisq.DefaultPrefix).BackendSet()).Val(); n != 0 {
		t.Fatal("a refused backend registered")
	}
}

// The Redis flags (and their environment variables) reach the options.
func TestBackendRedisFlags(t *testing.T) {
	t.Setenv("USHER_BACKEND_REDIS", "redis://10.0.0.1:6379")
	o := &backendOptions{newStarter: func(sandbox.Config) (backend.Starter, error) { return nil, errors.New("stop here") }}
	cmd := backendCommand(o)
	cmd.SetArgs([]string{"--redis-prefix", "{prod}:", "--advertise", "10.0.0.7:8081", "--heartbeat-ttl", "6s"})
	cmd.SetErr(io.Discard)
	cmd.SetContext(context.Background())
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "stop here") {
		t.Fatalf("execute = %v", err)
	}
	if o.redis != "redis://10.0.0.1:6379" || o.redisPrefix != "{prod}:" || o.advertise != "10.0.0.7:8081" || o.heartbeatTTL != 6*time.Second {
		t.Fatalf("options %q %q %q %v", o.redis, o.redisPrefix, o.advertise, o.heartbeatTTL)
	}
	if d := backendCommand(&backendOptions{}).Flags().Lookup("redis-prefix").DefValue; d != redisq.DefaultPrefix {
		t.Fatalf("--redis-prefix defaults to %q", d)
	}
}

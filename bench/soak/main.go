// Command soak drives a real `usher serve` with mixed public traffic for a
// long time and checks what a public deployment must keep true: no task is
// lost or answered twice, memory and open files stay flat after the first
// minutes, and cached renders stay fast.
//
//	go run ./bench/soak -duration 30m
//
// The traffic: WebSocket tasks on /asy (new figures, repeated ones the
// result cache answers, hostile ones — an endless loop, an output flood, a
// write outside the task — and clients that vanish mid-task), and render
// API hits (a cached figure by its permanent URL) and misses (a new figure
// by POST). Every minute it prints the server's resident memory and open
// files and the cached renders' p50/p99; at the end, a verdict.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/usherhq/usher/internal/asybench"
	"github.com/usherhq/usher/internal/asyclient"
)

type config struct {
	duration  time.Duration
	every     time.Duration
	wsClients int
	renderers int
	backends  int
	bin       string
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", 30*time.Minute, "how long the traffic runs")
	flag.DurationVar(&c.every, "every", time.Minute, "time between progress lines")
	flag.IntVar(&c.wsClients, "ws-clients", 6, "WebSocket clients, each one task after another")
	flag.IntVar(&c.renderers, "renderers", 4, "render API clients, each one request after another")
	flag.IntVar(&c.backends, "backends", 2, "local sandboxed backends of the server")
	flag.StringVar(&c.bin, "bin", "bin/usher", "the usher binary (make build)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, c, os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	if !ok {
		os.Exit(1)
	}
}

// run starts the server, drives it for c.duration and prints the verdict;
// ok is false when a promise was broken.
func run(ctx context.Context, c config, out io.Writer) (ok bool, err error) {
	srv, err := startServer(ctx, c)
	if err != nil {
		return false, err
	}
	defer srv.stop()
	st := newStats()
	cached, err := warmRender(ctx, srv.url)
	if err != nil {
		return false, fmt.Errorf("the first render: %w", err)
	}
	trafficCtx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range c.wsClients {
		wg.Go(func() { wsClient(trafficCtx, srv.url, i, st) })
	}
	for i := range c.renderers {
		wg.Go(func() { renderClient(trafficCtx, srv.url, cached, i, st) })
	}
	samples := watch(trafficCtx, srv.pid, c.every, st, out)
	wg.Wait()
	return verdict(st, samples, out), nil
}

// server is the usher serve child process.
type server struct {
	url  string
	pid  int
	cmd  *exec.Cmd
	dir  string
	logs *os.File
}

func startServer(ctx context.Context, c config) (*server, error) {
	dir, err := os.MkdirTemp("", "soak-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logs, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.bin, "serve", "--listen", addr, "--data", filepath.Join(dir, "usher.db"),
		"--backends", fmt.Sprint(c.backends), "--medium-limit", fmt.Sprint(c.backends), "--slow-limit", fmt.Sprint(c.backends),
		"--max-queued-per-client", "1000", "--render-rate", "0", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", c.bin, err)
	}
	s := &server{url: "http://" + addr, pid: cmd.Process.Pid, cmd: cmd, dir: dir, logs: logs}
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(s.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("usher serve not ready after a minute; see %s", s.logs.Name())
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
	s.logs.Close()
	os.RemoveAll(s.dir)
}

// The figures of the traffic.
var (
	// hostile figures end in an error, never in a hung or hurt server.
	hostile = []string{
		"while(true) {}\n",                                   // the tier's time limit ends it
		"for(int i=0; i<100000000; ++i) write(i);\n",         // an output flood
		"file f=output(\"/tmp/escape.txt\"); write(f, 1);\n", // a write outside the task
	}
)

func figure(i int) string { return fmt.Sprintf("%s// soak figure %d\n", asybench.Figure, i) }

// wsKind is what a WebSocket client does next.
type wsKind int

const (
	wsNew wsKind = iota
	wsRepeat
	wsHostile
	wsVanish
)

func pickKind(r *rand.Rand) wsKind {
	switch n := r.IntN(10); {
	case n < 4:
		return wsNew
	case n < 7:
		return wsRepeat
	case n < 8:
		return wsHostile
	default:
		return wsVanish
	}
}

// wsClient runs one task after another until ctx ends.
func wsClient(ctx context.Context, base string, id int, st *stats) {
	r := rand.New(rand.NewPCG(uint64(id), 1))
	url := "ws" + strings.TrimPrefix(base, "http") + "/asy"
	for n := 0; ctx.Err() == nil; n++ {
		kind := pickKind(r)
		src := figure(r.IntN(8)) // repeated: one of a few figures the cache answers
		switch kind {
		case wsNew:
			src = figure(1000 + id*1_000_000 + n)
		case wsHostile:
			src = hostile[r.IntN(len(hostile))]
		}
		wsTask(ctx, url, src, kind, st)
	}
}

// wsTask runs one task and records how it ended: exactly one end message
// and then the close, or a vanish on purpose.
func wsTask(ctx context.Context, url, src string, kind wsKind, st *stats) {
	// A task's own deadline outlives the traffic: a task under way when the
	// soak ends still gets its answer.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	c, err := asyclient.Dial(tctx, url)
	if err != nil {
		st.add(&st.dialFailed)
		return
	}
	defer c.Close()
	files := []asyclient.File{{Name: "fig.asy", Data: []byte(src), Main: true}}
	// Ordinary figures get the medium tier, room for a loaded machine;
	// hostile ones the fast tier, which ends the endless loop sooner.
	limit := 10 * time.Second
	if kind == wsHostile {
		limit = 3 * time.Second
	}
	if err := c.Submit(tctx, files, asyclient.Options{Timeout: limit}); err != nil {
		st.add(&st.lost)
		return
	}
	ends := 0
	for {
		m, err := c.Next(tctx)
		if err != nil {
			if ends == 0 {
				st.add(&st.lost) // the connection ended with no answer
			}
			return
		}
		if kind == wsVanish && m.Verb == "queue" {
			st.add(&st.vanished)
			return // gone mid-task: the deferred Close drops the connection
		}
		if !m.Final() {
			continue
		}
		ends++
		switch {
		case ends > 1:
			st.add(&st.twice)
		case m.Verb == "denied":
			st.add(&st.denied)
		case m.Success:
			st.add(&st.succeeded)
		case kind == wsHostile:
			st.add(&st.hostileEnded)
		default:
			st.fail(m.Error)
		}
	}
}

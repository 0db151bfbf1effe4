// Package asyqueue is the Asymptote service's queue server: the queue
// protocol at /asy (docs/design.md, "The queue protocol"), driven by the
// duration tiers in the scheduling core, and the policy both modes share
// (policy.go): caps, denial texts and the reaction to the core's events.
//
// A Server accepts a client's files and options (collect.go), answers from
// the result cache when it can (cache.go), queues the task with the
// Dispatcher (dispatcher.go), which owns the core, and relays the run on a
// backend back to the client (session.go). Backends are Starters: the
// in-process sandbox runner or remote `usher backend`s. Render
// (render.go) runs a task for an HTTP client through the same session,
// which then sends to a collector instead of a connection.
package asyqueue

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/resultcache"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// Config sets up a Server. Zero fields take the defaults in brackets.
type Config struct {
	MaxFiles      int           // files in one task [32]
	MaxUpload     int64         // bytes of all files of one task [1 MiB]
	MaxInput      int64         // bytes of one `input` message [64 KiB]
	IdleBeforeRun time.Duration // a client must send `run` this soon after connecting [60 s]
	// AsyVersion names the asy that runs tasks; it is part of the cache key.
	AsyVersion string
	// ClientAddress names the client of a request for the per-client cap
	// (default: the peer's IP, PeerAddress).
	ClientAddress func(*http.Request) string
	Logger        *slog.Logger
}

// ResultCache keeps the outputs of successful runs by key: the SQLite
// file's resultcache.Cache in the embedded default, Redis in multi-node
// mode.
type ResultCache interface {
	Get(ctx context.Context, key string) (resultcache.Entry, bool, error)
	Put(ctx context.Context, key string, e resultcache.Entry) error
}

// UploadStore keeps recently uploaded files by SHA-256 for `add {restore:
// true}`: the process's uploads.Store in the embedded default, Redis in
// multi-node mode. A failure counts as not kept or as a miss: the client
// then sends the file again.
type UploadStore interface {
	// Put keeps data under hash (already checked) and reports whether it
	// is kept.
	Put(ctx context.Context, hash string, data []byte) bool
	// Get returns the file stored under hash.
	Get(ctx context.Context, hash string) ([]byte, bool)
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.MaxFiles <= 0 {
		c.MaxFiles = 32
	}
	if c.MaxUpload <= 0 {
		c.MaxUpload = 1 << 20
	}
	if c.MaxInput <= 0 {
		c.MaxInput = 64 << 10
	}
	if c.IdleBeforeRun <= 0 {
		c.IdleBeforeRun = time.Minute
	}
	if c.ClientAddress == nil {
		c.ClientAddress = PeerAddress
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Queue takes the tasks a Server collected and tells each through its
// Ticket when and where it runs: the Dispatcher in single-node mode, a
// Redis queue server (internal/redisq/frontend) in multi-node mode.
type Queue interface {
	// Timeouts lists the task timeouts a client may ask for (the tiers).
	Timeouts() []time.Duration
	// Submit queues t for client, or starts it at once when it is
	// interactive; errors are the client's denial texts (ErrQueueFull,
	// ErrNoBackend, ErrInvalidLimit, ErrStopped).
	Submit(client string, t sandbox.Task) (*Ticket, error)
	// Release says the task is over; ran is false when it was aborted.
	Release(t *Ticket, ran bool)
	// NoteDenial records a denial the session decided, for the dashboard.
	NoteDenial(text string)
}

// Server serves the queue protocol. It is an http.Handler for /asy.
type Server struct {
	cfg     Config
	d       Queue
	uploads UploadStore
	cache   ResultCache // nil: no result cache
	metrics *Metrics

	ctx      context.Context // ends every session when cancelled
	sessions sync.WaitGroup

	flightsMu sync.Mutex
	flights   map[string]*flight // HTTP renders in progress, by task
}

// NewServer returns a server that queues with q, keeps uploads in up and,
// when cache is not nil, answers repeated tasks from it. Sessions end when
// ctx ends. metrics may be nil.
func NewServer(ctx context.Context, cfg Config, q Queue, up UploadStore, cache ResultCache, metrics *Metrics) *Server {
	cfg.setDefaults()
	return &Server{cfg: cfg, d: q, uploads: up, cache: cache, metrics: metrics, ctx: ctx}
}

// ServeHTTP upgrades the request to a WebSocket and serves one task.
// It accepts any origin: which origins may connect is the caller's policy,
// checked before the upgrade (internal/access, Policy.WebSocket).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered the client
	}
	s.sessions.Add(1)
	defer s.sessions.Done()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	conn := wire.NewConn(ws, 0, clientVerbs...)
	sess := &session{srv: s, conn: conn, out: conn, client: s.cfg.ClientAddress(r)}
	sess.serve(ctx)
}

// Wait blocks until every session has ended or ctx ends.
func (s *Server) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.sessions.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PeerAddress is the IP of the request's peer: the client's address when
// no proxy stands between.
func PeerAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// closeWith ends the connection normally after the last message; an HTTP
// render has none.
func closeWith(conn *wire.Conn) {
	if conn == nil {
		return
	}
	_ = conn.WebSocket().Close(websocket.StatusNormalClosure, "")
}

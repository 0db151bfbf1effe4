// Package backend serves the backend protocol ("Asymptote server")
// over WebSocket: a client adds files, sets options, says run, and gets
// output, images and a complete message back from one sandboxed asy task;
// then the connection closes. One connection at a time. docs/protocol.md
// describes the protocol as implemented, with every error text.
//
// Backend is an http.Handler, mounted at "/" by `usher backend` and usable
// in-process by `usher serve`; it runs tasks through a Starter, which is a
// *sandbox.Runner in production (see Sandbox).
package backend

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/wire"
)

// Defaults of Config's fields.
const (
	DefaultMaxInput     = 64 << 10
	DefaultSetupTimeout = 30 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultBusyGrace    = time.Second
	DefaultDrainWait    = 30 * time.Second
)

// Config sets up a Backend. Zero fields take the defaults.
type Config struct {
	Starter Starter // required
	// MaxFiles and MaxUpload cap one task's files: their number and their
	// bytes together, counted while reading. Defaults: the runner's
	// sandbox.DefaultLimits().Files and .Upload.
	MaxFiles  int
	MaxUpload int64
	// MaxHeader caps one text message (wire.DefaultMaxHeader).
	MaxHeader int64
	// MaxInput caps the payload of one input message (DefaultMaxInput).
	MaxInput int64
	// SetupTimeout is how long a client may take from connecting to run
	// (DefaultSetupTimeout).
	SetupTimeout time.Duration
	// WriteTimeout bounds sending one message; a client that does not
	// read for this long aborts its task (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// BusyGrace is how long a second connection waits for the first to
	// end before it is refused with "backend busy" (DefaultBusyGrace).
	BusyGrace time.Duration
	// DrainWait is how long a connection waits for the task of a client
	// that already left to be cleaned up (DefaultDrainWait).
	DrainWait time.Duration
	// OriginPatterns are browser origins allowed besides the backend's
	// own host (websocket.AcceptOptions.OriginPatterns).
	OriginPatterns []string
	Logger         *slog.Logger // slog.Default() when nil
}

// Backend serves the backend protocol, one connection at a time.
type Backend struct {
	cfg      Config
	log      *slog.Logger
	base     context.Context
	abortAll context.CancelFunc

	mu      sync.Mutex
	active  *session // holds the one slot
	closing bool
	serving sync.WaitGroup // connections that hold or wait for the slot
}

// New returns a Backend; it refuses a Config without a Starter.
func New(cfg Config) (*Backend, error) {
	if cfg.Starter == nil {
		return nil, errors.New("backend: no Starter")
	}
	cfg = withDefaults(cfg)
	base, abort := context.WithCancel(context.Background())
	return &Backend{cfg: cfg, log: cfg.Logger, base: base, abortAll: abort}, nil
}

func withDefaults(cfg Config) Config {
	if cfg.MaxFiles <= 0 || cfg.MaxUpload <= 0 {
		lim := sandbox.DefaultLimits()
		if cfg.MaxFiles <= 0 {
			cfg.MaxFiles = lim.Files
		}
		if cfg.MaxUpload <= 0 {
			cfg.MaxUpload = lim.Upload
		}
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&cfg.SetupTimeout, DefaultSetupTimeout)
	set(&cfg.WriteTimeout, DefaultWriteTimeout)
	set(&cfg.BusyGrace, DefaultBusyGrace)
	set(&cfg.DrainWait, DefaultDrainWait)
	if cfg.MaxHeader <= 0 {
		cfg.MaxHeader = wire.DefaultMaxHeader
	}
	if cfg.MaxInput <= 0 {
		cfg.MaxInput = DefaultMaxInput
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// ServeHTTP upgrades a request to a WebSocket and serves one task on it,
// or refuses it with complete {success:false, error:"backend busy"} when
// another connection holds the backend. A request that is not a WebSocket
// handshake gets the library's HTTP error (426 Upgrade Required).
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	opts := &websocket.AcceptOptions{OriginPatterns: b.cfg.OriginPatterns}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		_, _ = websocket.Accept(w, r, opts) // writes the HTTP error
		return
	}
	if !b.track() {
		b.refuse(w, r, &refusal{text: ErrShuttingDown, code: websocket.StatusGoingAway})
		return
	}
	defer b.serving.Done()
	s, why := b.acquire(r.Context(), b.log.With("remote", r.RemoteAddr))
	if s == nil {
		b.refuse(w, r, why)
		return
	}
	ws, err := websocket.Accept(w, r, opts)
	if err != nil {
		b.log.Info("backend: handshake failed", "remote", r.RemoteAddr, "err", err)
		s.finish(nil) // frees the slot
		return
	}
	s.serve(ws)
}

// track counts a connection unless the backend is shutting down.
func (b *Backend) track() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return false
	}
	b.serving.Add(1)
	return true
}

// acquire takes the slot for a new session. While another session holds
// it, a connection waits BusyGrace for it to end, and DrainWait once that
// session's client has left; then it is refused.
func (b *Backend) acquire(ctx context.Context, log *slog.Logger) (*session, *refusal) {
	busy := &refusal{text: ErrBusy, code: websocket.StatusTryAgainLater}
	grace := time.NewTimer(b.cfg.BusyGrace)
	defer grace.Stop()
	for {
		b.mu.Lock()
		if b.closing {
			b.mu.Unlock()
			return nil, &refusal{text: ErrShuttingDown, code: websocket.StatusGoingAway}
		}
		cur := b.active
		if cur == nil {
			s := newSession(b, log)
			b.active = s
			b.mu.Unlock()
			return s, nil
		}
		b.mu.Unlock()
		select {
		case <-cur.released:
		case <-cur.ending:
			if !wait(ctx, cur.released, b.cfg.DrainWait) {
				return nil, busy
			}
		case <-grace.C:
			return nil, busy
		case <-ctx.Done():
			return nil, busy
		}
	}
}

// wait waits up to d for ch to close.
func wait(ctx context.Context, ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// release frees the slot s holds.
func (b *Backend) release(s *session) {
	b.mu.Lock()
	if b.active == s {
		b.active = nil
	}
	b.mu.Unlock()
	close(s.released)
}

// refuse answers a connection that gets no slot.
func (b *Backend) refuse(w http.ResponseWriter, r *http.Request, why *refusal) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: b.cfg.OriginPatterns})
	if err != nil {
		return
	}
	b.log.Info("backend: connection refused", "remote", r.RemoteAddr, "reason", why.text)
	conn := wire.NewConn(ws, b.cfg.MaxHeader, Incoming...)
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.WriteTimeout)
	defer cancel()
	_ = conn.Send(ctx, VerbComplete, CompleteBody{Error: why.text})
	_ = ws.Close(why.code, closeReason(why.text))
}

// Busy reports whether a connection holds the backend.
func (b *Backend) Busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active != nil
}

// Shutdown refuses new connections, lets the current task finish until ctx
// ends, then aborts it with complete {success:false, error:"backend
// shutting down"}, and returns once every connection is closed and no
// task is left.
func (b *Backend) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	b.closing = true
	s := b.active
	b.mu.Unlock()
	var err error
	if s != nil {
		select {
		case <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
			s.end(&refusal{text: ErrShuttingDown, code: websocket.StatusGoingAway})
		}
	}
	b.serving.Wait()
	b.abortAll()
	return err
}

// closeReason fits text into a close frame (123 bytes).
func closeReason(text string) string {
	const max = 123
	if len(text) <= max {
		return text
	}
	cut := max
	for cut > 0 && text[cut]&0xC0 == 0x80 {
		cut--
	}
	return text[:cut]
}

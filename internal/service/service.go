// Package service assembles the embedded default that `usher serve` runs:
// one HTTP server with the /asy queue protocol, health and metrics
// endpoints and the web app; the scheduling core behind a dispatcher; a
// SQLite file for durable state; local sandboxed backends and any remote
// `usher backend`s.
package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/access"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/renderapi"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/internal/shares"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/tokens"
)

// Config is what `usher serve` takes from its flags.
type Config struct {
	Addr string // HTTP listen address
	// AdminAddr, when set, serves the operator views (/dashboard,
	// /api/dashboard, /metrics) there, without a token, and not on Addr.
	AdminAddr string
	// Access is who may use what (docs/operations.md, "Hosting for the
	// public"); its Tokens and Logger are the service's.
	Access   access.Config
	DataPath string // the SQLite file
	// LocalBackends is how many tasks run in-process at once (0: none).
	LocalBackends int
	// RemoteBackends are ws:// URLs of `usher backend`s.
	RemoteBackends []string
	// MediumLimit and SlowLimit cap running medium-or-slower and slow
	// tasks; 0 means ⌈slots/2⌉ and ⌈slots/4⌉.
	MediumLimit, SlowLimit int
	Sandbox                sandbox.Config
	Queue                  asyqueue.Config
	// Caps bound the tasks waiting in the queue, in either mode.
	Caps asyqueue.Caps
	// Dispatcher tunes the embedded default's dispatcher (its Tiers and
	// Caps come from the fields above).
	Dispatcher asyqueue.DispatcherConfig
	// CacheBytes bounds the result cache; 0 turns it off.
	CacheBytes  int64
	UploadBytes int64 // bound of the restore store
	// ShareBytes bounds the content of one shared project (default 256 KiB).
	ShareBytes int64
	// ShareRetention: a share not opened for this long expires (0: kept
	// for good).
	ShareRetention time.Duration
	// ShareQuota bounds the bytes of all shares; beyond it new shares are
	// refused (0: no bound).
	ShareQuota int64
	// Render bounds the render API's store of sources.
	Render RenderConfig
	// ShutdownGrace is how long running tasks may finish after a stop signal.
	ShutdownGrace time.Duration
	Logger        *slog.Logger
	// WebApp, when set, serves the browser front end at /, /s/{id},
	// /dashboard and /assets/.
	WebApp http.Handler
	// Jobs configures the generic jobs of /v1.
	Jobs JobsConfig
	// Redis, when its URL is set, makes this a queue server of multi-node
	// mode: tasks go to Redis for the elected scheduler and the backends
	// registered there (docs/redis.md); no backend runs in this process.
	Redis RedisConfig

	// now is the stores' clock (time.Now when nil); tests set it.
	now func() time.Time

	// asy is the asy that /api/symbols asks ("asy" in PATH when empty);
	// tests name a missing one.
	asy string

	// dashEvery is the time between /api/dashboard snapshots
	// (dashboardEvery when 0); tests shorten it.
	dashEvery time.Duration
}

// RenderConfig bounds the sources the render API keeps for its permanent
// URLs: bytes in the SQLite file, or retention after last use in Redis.
type RenderConfig struct {
	SourceBytes     int64         // renderapi.DefaultSourceBytes when 0
	SourceRetention time.Duration // renderapi.DefaultSourceRetention when 0
}

// RedisConfig connects a queue server to multi-node mode.
type RedisConfig struct {
	URL    string // redisq.Open's URL
	Prefix string // key prefix (redisq.DefaultPrefix when empty)
	Node   string // this queue server's name in the task hashes
}

// JobsConfig configures the generic jobs of /v1.
type JobsConfig struct {
	// Tiers are the duration tiers of generic jobs (empty: jobs.DefaultTiers).
	Tiers []sched.Tier
	// LeaseTTL is how long an agent's lease lasts (0: 30 s).
	LeaseTTL time.Duration
	// AdminToken, when set, is made an admin token.
	AdminToken string
	// AdminTokenFile receives a new admin token when none exists
	// (default: usher-admin.token beside the data file).
	AdminTokenFile string
	// MaxBody caps a /v1 request body (0: 32 MiB).
	MaxBody int64
	// Tracer, when set, records /v1's spans of jobs (jobsapi.Config).
	Tracer trace.Tracer
	// Retention is how long finished jobs are kept (0: for good).
	Retention time.Duration
	// KeyRetention is how long an idempotency key is kept (0: 24 h).
	KeyRetention time.Duration
}

// Service is a configured, not yet serving, `usher serve`: the parts both
// modes share, and the mode chosen when it was built.
type Service struct {
	cfg      Config
	db       *sql.DB
	mode     mode
	queue    *asyqueue.Server
	render   *renderapi.API
	handler  http.Handler
	registry *prometheus.Registry
	shares   shares.Store
	queueCfg asyqueue.Config // with defaults applied
	access   *access.Policy
	admin    http.Handler // the operator views on AdminAddr; nil without
	// asyVersion is asy's version line, shown by /api/info and part of
	// the result cache's key.
	asyVersion string
	// catalogs are the editor's: asy's symbols, TeX, the examples.
	catalogs *pendingCatalogs
	ready    atomic.Bool
	stopAll  context.CancelFunc
	ctx      context.Context
	stopping chan struct{} // closed when shutdown begins: live streams end
}

// mode is what the embedded default and a queue server of multi-node mode
// do differently. New chooses one, once, from the configuration.
type mode interface {
	// queue is what /asy submits tasks to.
	queue() asyqueue.Queue
	// snapshots feeds the queue's gauges in /metrics (nil: none here).
	snapshots() *asyqueue.Dispatcher
	// v1 serves the generic jobs' API under /v1/.
	v1() http.Handler
	// tokens is the token store of logins and the admin token.
	tokens() *tokens.Store
	// dashboard is the state /api/dashboard sends now.
	dashboard(ctx context.Context) (dashboard.Dashboard, error)
	// tally counts what the queue server's sessions see, for the
	// dashboard's history.
	tally() *dashboard.Tally
	// start runs the mode's work until ctx ends.
	start(ctx context.Context) error
	// drain stops handing out new work: shutdown has begun.
	drain()
	// stores opens the shares, the result cache and the upload store
	// that this mode's queue servers use.
	stores(ctx context.Context, db *sql.DB, cfg Config, shareCfg shares.Config) (stores, error)
	// close releases what the mode holds.
	close()
}

// New opens the data file, checks the sandbox and wires every part.
func New(cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.dashEvery <= 0 {
		cfg.dashEvery = dashboardEvery
	}
	s := &Service{cfg: cfg, ctx: ctx, stopAll: cancel, registry: prometheus.NewRegistry(), stopping: make(chan struct{})}
	if err := s.open(ctx); err != nil {
		cancel()
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *Service) open(ctx context.Context) error {
	db, err := sqlitedb.Open(ctx, s.cfg.DataPath)
	if err != nil {
		return err
	}
	s.db = db
	qcfg := s.cfg.Queue
	qcfg.Logger = s.cfg.Logger
	if qcfg.AsyVersion == "" {
		qcfg.AsyVersion = asyVersion(ctx)
	}
	s.asyVersion, s.queueCfg = qcfg.AsyVersion, qcfg.WithDefaults()
	// The editor's catalogs are made beside the rest of the start; a
	// request for one waits until they are.
	s.catalogs = startCatalogs(ctx, s.cfg.asy, s.asyVersion, s.cfg.Logger)
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s.mode, err = s.openMode(ctx); err != nil {
		return err
	}
	acfg := s.cfg.Access
	acfg.Tokens, acfg.Logger, acfg.Registerer = s.mode.tokens(), s.cfg.Logger, s.registry
	s.access = access.New(acfg)
	if qcfg.ClientAddress == nil {
		qcfg.ClientAddress = s.access.ClientAddress
	}
	s.queueCfg.ClientAddress = qcfg.ClientAddress
	if err := s.openServers(ctx, qcfg); err != nil {
		return err
	}
	s.handler = s.routes()
	if s.cfg.AdminAddr != "" {
		s.admin = s.adminRoutes()
	}
	return nil
}

// openServers opens the mode's stores and builds on them the /asy server
// and the render API.
func (s *Service) openServers(ctx context.Context, qcfg asyqueue.Config) error {
	st, err := s.mode.stores(ctx, s.db, s.cfg, s.shareConfig())
	if err != nil {
		return err
	}
	s.shares = st.shares
	s.registry.MustRegister(newShareCollector(s.shares, s.cfg.ShareQuota))
	s.queue = asyqueue.NewServer(ctx, qcfg, s.mode.queue(), st.uploads, st.cache, asyqueue.NewMetrics(s.registry, s.mode.snapshots()).WithTally(s.mode.tally()))
	s.render = renderapi.New(s.queue, st.renderSources, s.registry, s.cfg.Logger)
	return nil
}

// openMode builds the mode the configuration asks for: a queue server of
// multi-node mode when a Redis URL is given, the embedded default else.
func (s *Service) openMode(ctx context.Context) (mode, error) {
	if s.cfg.Redis.URL != "" {
		m, err := openMultiNode(ctx, s.cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	m, err := openEmbedded(ctx, s.cfg, s.db, s.registry)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// tiers are the duration tiers of the Asymptote queue, in either mode.
func (c *Config) tiers() []sched.Tier { return asyqueue.Tiers(c.MediumLimit, c.SlowLimit) }

// asyVersion asks asy for its version line, part of the cache key.
func asyVersion(ctx context.Context) string {
	out, _ := exec.CommandContext(ctx, "asy", "-version").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// Handler is the service's HTTP handler (for tests that serve it themselves).
func (s *Service) Handler() http.Handler { return s.handler }

// openPaths are reachable without a login under --auth: health checks,
// the login page, and /v1 with its own tokens.
var openPaths = []string{"/livez", "/readyz", "/login", "/logout", "/v1/"}

func (s *Service) routes() http.Handler {
	p := s.access
	mux := http.NewServeMux()
	mux.Handle("GET /asy", p.WebSocket(s.queue))
	mux.HandleFunc("GET /livez", livez)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /api/info", s.apiInfo)
	mux.Handle("GET /api/symbols", s.catalogs.handler(func(c catalogs) *staticJSON { return c.symbols }))
	mux.Handle("GET /api/tex", s.catalogs.handler(func(c catalogs) *staticJSON { return c.tex }))
	mux.Handle("GET /api/examples", s.catalogs.handler(func(c catalogs) *staticJSON { return c.examples }))
	mux.Handle("/v1/", s.mode.v1())
	mux.Handle("POST /api/shares", p.Shares(http.HandlerFunc(s.apiPostShare)))
	mux.Handle("GET /api/shares/{id}", p.Shares(http.HandlerFunc(s.apiGetShare)))
	mux.Handle("OPTIONS /api/shares", p.Shares(http.NotFoundHandler()))      // CORS preflights
	mux.Handle("OPTIONS /api/shares/{id}", p.Shares(http.NotFoundHandler())) // answer before the handler
	s.render.Register(mux, p.CORS, p.Render)
	p.LoginRoutes(mux)
	if s.cfg.AdminAddr == "" {
		s.operatorRoutes(mux, p.RequireAdmin)
	}
	if s.cfg.WebApp != nil {
		for _, pat := range []string{"GET /{$}", "GET /s/{id}", "GET /tex", "GET /jobs", "GET /jobs/", "GET /assets/"} {
			mux.Handle(pat, s.cfg.WebApp)
		}
	} else {
		mux.HandleFunc("GET /{$}", indexPage)
	}
	return p.RequireLogin(openPaths, mux)
}

// operatorRoutes registers the operator views, each wrapped in guard.
func (s *Service) operatorRoutes(mux *http.ServeMux, guard func(http.Handler) http.Handler) {
	mux.Handle("GET /metrics", guard(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})))
	mux.Handle("GET /api/dashboard", guard(http.HandlerFunc(s.apiDashboard)))
	mux.Handle("DELETE /api/shares/{id}", guard(http.HandlerFunc(s.apiDeleteShare)))
	if s.cfg.WebApp != nil {
		mux.Handle("GET /dashboard", guard(s.cfg.WebApp))
	}
}

// adminRoutes serves the operator views on --admin-listen, open to
// whoever reaches that address, with the dashboard page's assets.
func (s *Service) adminRoutes() http.Handler {
	mux := http.NewServeMux()
	s.operatorRoutes(mux, func(h http.Handler) http.Handler { return h })
	mux.HandleFunc("GET /livez", livez)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /{$}", http.RedirectHandler("/dashboard", http.StatusFound))
	if s.cfg.WebApp != nil {
		mux.Handle("GET /assets/", s.cfg.WebApp)
	}
	return mux
}

// AdminHandler is the handler of --admin-listen (nil without one), for
// tests that serve it themselves.
func (s *Service) AdminHandler() http.Handler { return s.admin }

func livez(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }

func (s *Service) readyz(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		http.Error(w, "not ready: no backend yet", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// Start runs the mode's work (in the embedded default: the dispatcher,
// the jobs engine and the backends); it returns once the service can take
// tasks.
func (s *Service) Start() error {
	if err := s.mode.start(s.ctx); err != nil {
		return err
	}
	go s.pruneShares(s.ctx)
	// Ready once started: with backends configured, or as a server of
	// generic jobs only (--backends 0), or as a queue server of multi-node
	// mode.
	s.ready.Store(true)
	return nil
}

// Serve listens on cfg.Addr (and cfg.AdminAddr when set) until ctx
// ends, then shuts down gracefully: no new connections, running tasks get
// ShutdownGrace to finish, then everything still open is aborted.
func (s *Service) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var admin net.Listener
	if s.cfg.AdminAddr != "" {
		if admin, err = net.Listen("tcp", s.cfg.AdminAddr); err != nil {
			ln.Close()
			return fmt.Errorf("serve: --admin-listen: %w", err)
		}
	}
	return s.ServeListeners(ctx, ln, admin)
}

// ServeListener is Serve on a listener the caller opened.
func (s *Service) ServeListener(ctx context.Context, ln net.Listener) error {
	return s.ServeListeners(ctx, ln, nil)
}

// ServeListeners is Serve on listeners the caller opened: the public one,
// and the operator views' (nil without --admin-listen).
func (s *Service) ServeListeners(ctx context.Context, ln, admin net.Listener) error {
	defer s.close()
	if err := s.Start(); err != nil {
		return err
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	var adminSrv *http.Server
	if admin != nil && s.admin != nil {
		adminSrv = &http.Server{Handler: s.admin, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- adminSrv.Serve(admin) }()
		defer adminSrv.Close()
		s.cfg.Logger.Info("usher operator views", "addr", admin.Addr().String())
	}
	s.cfg.Logger.Info("usher serving", "addr", ln.Addr().String(), "local_backends", s.cfg.LocalBackends,
		"remote_backends", len(s.cfg.RemoteBackends), "data", s.cfg.DataPath)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return s.shutdown(srv)
}

func (s *Service) shutdown(srv *http.Server) error {
	s.ready.Store(false)
	close(s.stopping)
	grace := s.cfg.ShutdownGrace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	s.cfg.Logger.Info("usher shutting down", "grace", grace)
	s.mode.drain()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = srv.Shutdown(ctx) // hijacked WebSocket connections are not waited for here
	if err := s.queue.Wait(ctx); err != nil {
		s.cfg.Logger.Warn("usher: aborting tasks still running after the grace period")
	}
	s.stopAll()
	abortCtx, cancelAbort := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelAbort()
	if err := s.queue.Wait(abortCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

func (s *Service) close() {
	s.stopAll()
	if s.mode != nil {
		s.mode.close()
	}
	if s.db != nil {
		s.db.Close()
	}
}

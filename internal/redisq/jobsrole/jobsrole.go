// Package jobsrole serves the generic jobs of /v1 from the leading
// scheduler of multi-node mode (docs/redis.md, "Generic jobs"): for each
// term of leadership it rebuilds the jobs engine from the Redis store,
// fenced by the term's token, serves /v1 with it and publishes its address
// in scheduler.api, where the queue servers find it. A standby answers 503.
package jobsrole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redisjobs"
	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/internal/tokens"
	"github.com/usherhq/usher/jobtype"
)

// Config sets up a Role.
type Config struct {
	Client redis.UniversalClient
	Keys   redisq.Keys
	// Listener serves /v1; Advertise is its base URL as queue servers
	// reach it (http://host:port).
	Listener  net.Listener
	Advertise string
	// Tiers, LeaseTTL and MaxBody are those of single-node mode's /v1.
	Tiers    []sched.Tier
	LeaseTTL time.Duration
	MaxBody  int64
	// KeyRetention is how long an idempotency key is kept (0: 24 h).
	KeyRetention time.Duration
	// AdminToken, when set, is made an admin token; else, when no admin
	// token exists, one is created and written to AdminTokenFile.
	AdminToken     string
	AdminTokenFile string
	// PublishEvery is how often the leader renews scheduler.api (500 ms);
	// the key lives PublishTTL (3 s) unless renewed.
	PublishEvery time.Duration
	PublishTTL   time.Duration
	Logger       *slog.Logger
	// Metrics, when set, answers GET /metrics on the listener, whether
	// this node leads or stands by (docs/operations.md).
	Metrics http.Handler
	// Tracer, when set, records /v1's spans of jobs (jobsapi.Config).
	Tracer trace.Tracer
	// Observer, when set, learns of the attempts of every term's engine
	// (jobs.Config.Observer).
	Observer jobs.Observer
}

// Role serves /v1 while its node leads.
type Role struct {
	cfg     Config
	tokens  *tokens.Store
	handler atomic.Pointer[http.Handler] // nil while standing by
	engine  atomic.Pointer[jobs.Engine]  // this term's engine; nil while standing by
	server  *http.Server
}

// New opens the tokens on Redis and makes sure an admin token exists.
func New(ctx context.Context, cfg Config) (*Role, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PublishEvery <= 0 {
		cfg.PublishEvery = 500 * time.Millisecond
	}
	if cfg.PublishTTL <= 0 {
		cfg.PublishTTL = 3 * time.Second
	}
	r := &Role{cfg: cfg, tokens: tokens.OpenRedis(cfg.Client, cfg.Keys.Prefix(), 0, cfg.Logger)}
	if err := r.ensureAdmin(ctx); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	mux.HandleFunc("/", r.serveHTTP)
	r.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return r, nil
}

func (r *Role) ensureAdmin(ctx context.Context) error {
	if r.cfg.AdminToken != "" {
		_, err := r.tokens.Add(ctx, r.cfg.AdminToken, "admin (from the command line)", tokens.Admin)
		return err
	}
	if n, err := r.tokens.Count(ctx, tokens.Admin); err != nil || n > 0 {
		return err
	}
	_, secret, err := r.tokens.Create(ctx, "admin (first start)", tokens.Admin)
	if err != nil {
		return err
	}
	if err := os.WriteFile(r.cfg.AdminTokenFile, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing the admin token: %w", err)
	}
	r.cfg.Logger.Info("created an admin token for /v1", "file", r.cfg.AdminTokenFile)
	return nil
}

// Serve answers on the listener until ctx ends.
func (r *Role) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.server.Shutdown(sctx)
	})
	defer stop()
	if err := r.server.Serve(r.cfg.Listener); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("jobs API: %w", err)
	}
	return nil
}

func (r *Role) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if h := r.handler.Load(); h != nil {
		(*h).ServeHTTP(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, `{"error":"this scheduler stands by; the leader serves /v1"}`)
}

// WhileLeading is scheduler.Config.WhileLeading: for one term it rebuilds
// the engine from Redis, serves /v1 with it and publishes the address.
func (r *Role) WhileLeading(ctx context.Context, token string) {
	log := r.cfg.Logger.With("token", token)
	store := redisjobs.New(r.cfg.Client, r.cfg.Keys.Prefix(), redisjobs.Fence{Key: r.cfg.Keys.Leader(), Token: token}, log)
	defer store.Close()
	engine, err := r.open(ctx, store, log)
	switch {
	case err == nil:
	case ctx.Err() != nil || errors.Is(err, redisjobs.ErrFenced):
		// The term ended (a kill, a lost lease, another leader) before
		// Redis could be read: nothing failed, the next leader rebuilds.
		log.Info("jobs: the term ended before the engine was rebuilt", "err", err)
		return
	default:
		log.Error("jobs: rebuilding the engine from redis failed; /v1 stays unserved this term", "err", err)
		return
	}
	go engine.Run(ctx)
	r.engine.Store(engine)
	defer r.engine.Store(nil)
	var h http.Handler = jobsapi.Handler(jobsapi.Config{Engine: engine, Tokens: r.tokens, MaxBody: r.cfg.MaxBody, Logger: log,
		Tracer: r.cfg.Tracer})
	r.handler.Store(&h)
	defer r.handler.Store(nil)
	log.Info("jobs: serving /v1", "advertise", r.cfg.Advertise)
	r.publish(ctx, token, log)
}

// open rebuilds the engine from the store, retrying with backoff while
// Redis cannot be read (down, restarting, LOADING) until the term ends or
// the store is fenced (the term is over).
func (r *Role) open(ctx context.Context, store *redisjobs.Store, log *slog.Logger) (*jobs.Engine, error) {
	wait := 50 * time.Millisecond
	for {
		engine, err := jobs.Open(ctx, jobs.Config{Store: store, Tiers: r.cfg.Tiers, LeaseTTL: r.cfg.LeaseTTL, KeyRetention: r.cfg.KeyRetention, Logger: log,
			Observer: r.cfg.Observer})
		if err == nil || errors.Is(err, redisjobs.ErrFenced) || ctx.Err() != nil {
			return engine, err
		}
		log.Warn("jobs: cannot rebuild the engine from redis; retrying", "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Stats is the generic jobs' state of the engine this node runs while it
// leads; false while it stands by (scheduler.Config.JobsStats, and the
// usher_jobs_* metrics of `usher scheduler`).
func (r *Role) Stats() (jobtype.Stats, bool) {
	e := r.engine.Load()
	if e == nil {
		return jobtype.Stats{}, false
	}
	return e.Stats(), true
}

// publishScript sets scheduler.api while the token still leads.
// KEYS: scheduler.leader, scheduler.api. ARGV: token, address, ttl ms.
var publishScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
`)

// unpublishScript deletes scheduler.api if it still names this node.
// KEYS: scheduler.api. ARGV: address.
var unpublishScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`)

// publish keeps scheduler.api naming this node until ctx ends or the
// token no longer leads. It writes on a connection of its own
// (redisq.RunOwn), as the lease is renewed, so that a busy Redis holds a
// write up once, not once per round trip of dialing a connection when the
// shared pool has none free, and the address outlives short stalls as the
// lease does.
func (r *Role) publish(ctx context.Context, token string, log *slog.Logger) {
	keys := []string{r.cfg.Keys.Leader(), r.cfg.Keys.SchedulerAPI()}
	tick := time.NewTicker(r.cfg.PublishEvery)
	defer tick.Stop()
	var conn *redis.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
		uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = unpublishScript.Run(uctx, r.cfg.Client, keys[1:], r.cfg.Advertise).Err()
	}()
	for {
		ok, err := redisq.RunOwn(ctx, r.cfg.Client, &conn, publishScript, keys, token, r.cfg.Advertise, r.cfg.PublishTTL.Milliseconds()).Int()
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("jobs: publishing the /v1 address failed", "err", err)
		case err == nil && ok == 0:
			log.Warn("jobs: no longer leading; /v1 stops")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

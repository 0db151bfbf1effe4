// Package backendrole is the backend of usher's multi-node mode on Redis
// (`usher backend --redis`), the backend role
// (docs/design.md, "Multi-node mode: roles and keys"): it registers in
// backend.set with a heartbeat, reads queue.outcoming as the "backend"
// consumer group, takes each task in one Lua script, runs it in the
// sandbox with its output held until the queue server connects to the
// task's URL, and serves the backend protocol's responses there.
// docs/redis.md ("Backend") lists the steps; this package follows them.
package backendrole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
)

// Defaults of Config's fields.
const (
	DefaultHeartbeatTTL  = 15 * time.Second
	DefaultAcceptTimeout = 30 * time.Second
	DefaultBlock         = 2 * time.Second
	DefaultDrain         = 30 * time.Second
	// maxBackoff caps the wait between retries while Redis fails.
	maxBackoff = 5 * time.Second
)

// Config sets up a backend role. Zero fields take the defaults.
type Config struct {
	Redis   redis.UniversalClient // required
	Keys    redisq.Keys           // key names under the deployment's prefix
	Starter backend.Starter       // required: the sandbox runner
	// Advertise is the host:port queue servers dial; task URLs are
	// ws://Advertise/task/TOKEN. Required.
	Advertise string
	// HeartbeatTTL is the life of backend:ID, renewed every third of it
	// (DefaultHeartbeatTTL).
	HeartbeatTTL time.Duration
	// AcceptTimeout is how long the queue server has to connect to a task
	// before its run is aborted (DefaultAcceptTimeout).
	AcceptTimeout time.Duration
	// Block is how long one XREADGROUP waits for a task before the role
	// looks whether it should stop (DefaultBlock).
	Block time.Duration
	// Drain is how long a running task may go on once Run's context ends
	// before it is aborted (DefaultDrain).
	Drain time.Duration
	// WriteTimeout bounds sending one message (backend.DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxInput caps one input payload (backend.DefaultMaxInput).
	MaxInput int64
	// OriginPatterns are browser origins allowed to connect besides the
	// backend's own host (websocket.AcceptOptions.OriginPatterns).
	OriginPatterns []string
	Logger         *slog.Logger // slog.Default() when nil
}

func (c Config) withDefaults() Config {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.HeartbeatTTL, DefaultHeartbeatTTL)
	set(&c.AcceptTimeout, DefaultAcceptTimeout)
	set(&c.Block, DefaultBlock)
	set(&c.Drain, DefaultDrain)
	set(&c.WriteTimeout, backend.DefaultWriteTimeout)
	if c.MaxInput <= 0 {
		c.MaxInput = backend.DefaultMaxInput
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) check() error {
	switch {
	case c.Redis == nil:
		return errors.New("backendrole: no Redis client")
	case c.Starter == nil:
		return errors.New("backendrole: no Starter")
	}
	return CheckAdvertise(c.Advertise)
}

// CheckAdvertise refuses an address queue servers could not dial: not
// host:port, or an unspecified host such as 0.0.0.0.
func CheckAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return fmt.Errorf("backendrole: advertised address %q is not host:port", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("backendrole: advertised address %q has no host queue servers can dial: set --advertise", addr)
	}
	return nil
}

// Role is one registered backend. Register makes it, Run serves tasks
// until its context ends, Handler is its HTTP side.
type Role struct {
	cfg Config
	log *slog.Logger
	id  string

	stopBeat context.CancelFunc
	beatDone chan struct{}

	mu       sync.Mutex
	cur      *job  // the task being run; nil between tasks
	beatErr  error // the last heartbeat's error
	stopping bool
}

// Register takes a backend ID, announces it (backend.set,
// backend.updated, backend:ID), creates the consumer group and starts the
// heartbeat. Run deregisters.
func Register(ctx context.Context, cfg Config) (*Role, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n, err := cfg.Redis.Incr(ctx, cfg.Keys.BackendCounter()).Result()
	if err != nil {
		return nil, fmt.Errorf("backendrole: new backend ID: %w", err)
	}
	r := &Role{cfg: cfg, id: strconv.FormatInt(n, 10), beatDone: make(chan struct{})}
	r.log = cfg.Logger.With("backend", r.id)
	if err := r.beat(ctx); err != nil {
		return nil, err
	}
	if err := r.createGroup(ctx); err != nil {
		r.deregister()
		return nil, err
	}
	beatCtx, stop := context.WithCancel(context.Background())
	r.stopBeat = stop
	go r.heartbeat(beatCtx)
	r.log.Info("backend: registered", "advertise", cfg.Advertise, "heartbeat_ttl", cfg.HeartbeatTTL)
	return r, nil
}

// ID is the backend's ID in backend.set.
func (r *Role) ID() string { return r.id }

// createGroup creates the consumer group, and the stream if need be.
// Entries added before any backend existed are delivered too (ID 0).
func (r *Role) createGroup(ctx context.Context) error {
	err := r.cfg.Redis.XGroupCreateMkStream(ctx, r.cfg.Keys.Outcoming(), redisq.ConsumerGroup, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("backendrole: create consumer group: %w", err)
	}
	return nil
}

// beatScript renews the heartbeat and, should the backend have been
// removed from backend.set meanwhile (the scheduler thought it dead),
// adds it back and says so on backend.updated. It also registers.
var beatScript = redis.NewScript(`
redis.call('SET', KEYS[1], '', 'PX', ARGV[2])
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[3], ARGV[1])
end
return 1`)

// beat runs beatScript once.
func (r *Role) beat(ctx context.Context) error {
	k := r.cfg.Keys
	err := beatScript.Run(ctx, r.cfg.Redis, []string{k.Backend(r.id), k.BackendSet(), k.BackendUpdated()},
		r.id, r.cfg.HeartbeatTTL.Milliseconds()).Err()
	if err != nil {
		err = fmt.Errorf("backendrole: heartbeat: %w", err)
	}
	r.mu.Lock()
	r.beatErr = err
	r.mu.Unlock()
	return err
}

// heartbeat renews backend:ID every third of its life until ctx ends.
func (r *Role) heartbeat(ctx context.Context) {
	defer close(r.beatDone)
	t := time.NewTicker(r.cfg.HeartbeatTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bctx, cancel := context.WithTimeout(ctx, r.cfg.HeartbeatTTL/3)
		if err := r.beat(bctx); err != nil && ctx.Err() == nil {
			r.log.Warn("backend: heartbeat failed", "err", err)
		}
		cancel()
	}
}

// deregister stops the heartbeat and removes the backend from Redis in
// one pipeline: DEL backend:ID, SREM backend.set, RPUSH backend.updated.
func (r *Role) deregister() {
	if r.stopBeat != nil {
		r.stopBeat()
		<-r.beatDone
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k := r.cfg.Keys
	_, err := r.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, k.Backend(r.id))
		p.SRem(ctx, k.BackendSet(), r.id)
		p.RPush(ctx, k.BackendUpdated(), r.id)
		return nil
	})
	if err != nil {
		r.log.Error("backend: deregistering failed; the scheduler drops it when its heartbeat expires", "err", err)
		return
	}
	r.log.Info("backend: deregistered")
}

// Run takes and runs tasks one at a time until ctx ends; then it lets the
// running task finish for up to Drain, aborts it after that, and
// deregisters. It returns nil once deregistered.
func (r *Role) Run(ctx context.Context) error {
	defer r.deregister()
	defer r.setStopping()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		err := r.cycle(ctx)
		if err == nil {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), maxBackoff)
		r.log.Error("backend: cycle failed", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	return nil
}

func (r *Role) setStopping() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
}

// current returns the task being run.
func (r *Role) current() *job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

func (r *Role) setCurrent(j *job) {
	r.mu.Lock()
	r.cur = j
	r.mu.Unlock()
}

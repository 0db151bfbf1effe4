// Package frontend is the queue server's side of multi-node mode: an
// asyqueue.Queue that hands each task to Redis and follows it there
// (docs/design.md, "Multi-node mode: roles and keys"), so that `usher serve --redis`
// serves /asy with the scheduler and the backends on other machines.
// docs/redis.md lists the steps and the keys.
package frontend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sched"
)

// Config sets up a Queue. Zero fields take the defaults in brackets.
type Config struct {
	Keys  redisq.Keys
	Tiers []sched.Tier // the timeouts clients may choose [sched.DefaultTiers]
	// Node names this queue server in the task hashes it writes.
	Node string
	// Caps bound the tasks waiting in Redis: MaxQueued counts those of all
	// queue servers together, MaxQueuedPerClient a client's on this one.
	Caps asyqueue.Caps
	// Wait is how long one blocking read waits for news of a task [1 s];
	// Renew how often the task's keys are kept from expiring [60 s].
	Wait  time.Duration
	Renew time.Duration
	// Quiet is how long a waiting task may hear nothing before its queue
	// server checks that Redis still holds it [10 s: the scheduler tells
	// every queued task its estimate at least every 5 s].
	Quiet  time.Duration
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if len(c.Tiers) == 0 {
		c.Tiers = sched.DefaultTiers()
	}
	c.Caps = c.Caps.WithDefaults()
	if c.Wait <= 0 {
		c.Wait = time.Second
	}
	if c.Renew <= 0 {
		c.Renew = time.Minute
	}
	if c.Quiet <= 0 {
		c.Quiet = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Queue is an asyqueue.Queue on Redis.
type Queue struct {
	rdb redis.UniversalClient
	cfg Config
	ctx context.Context // ends every task's watcher

	mu      sync.Mutex
	tasks   map[*asyqueue.Ticket]*task
	waiting *asyqueue.Waiting // this queue server's waiting tasks per client
}

// task is one task this queue server put into Redis.
type task struct {
	id      string
	ticket  *asyqueue.Ticket
	client  string
	timeout time.Duration
	stop    context.CancelFunc // ends the watcher
	done    chan struct{}      // closed when the watcher returned

	mu      sync.Mutex
	address string // the backend's, once delivered
	counted bool   // counts toward its client's waiting tasks
}

// New returns a Queue on rdb whose watchers end with ctx.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config) *Queue {
	cfg.setDefaults()
	return &Queue{rdb: rdb, cfg: cfg, ctx: ctx, tasks: map[*asyqueue.Ticket]*task{},
		waiting: asyqueue.NewWaiting(cfg.Caps)}
}

// Timeouts lists the tiers' durations.
func (q *Queue) Timeouts() []time.Duration {
	out := make([]time.Duration, len(q.cfg.Tiers))
	for i, t := range q.cfg.Tiers {
		out[i] = t.Duration
	}
	return out
}

// NoteDenial logs a denial the session decided (the dashboard of
// multi-node mode is the scheduler's).
func (q *Queue) NoteDenial(text string) {
	q.cfg.Logger.Debug("asy: denied", "reason", text)
}

// Submit writes t into Redis and queues it: an ID from task.counter, the task and files hashes with a 600 s
// expiry, the ID on queue.incoming.
func (q *Queue) Submit(client string, t sandbox.Task) (*asyqueue.Ticket, error) {
	if err := q.admit(client, t); err != nil {
		return nil, err
	}
	tk, err := q.create(client, t)
	if err != nil {
		q.unadmit(client, t)
		q.cfg.Logger.Error("asy: queueing in redis failed", "err", err)
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	return tk.ticket, nil
}

// errUnavailable is the denial when Redis cannot take the task.
var errUnavailable = errors.New("queue unavailable")

// admit checks the caps and counts the task toward its client's.
func (q *Queue) admit(client string, t sandbox.Task) error {
	if t.Timeout != 0 && !q.isTier(t.Timeout) {
		return fmt.Errorf("%w: %v", asyqueue.ErrInvalidLimit, t.Timeout)
	}
	if t.Interactive {
		return nil
	}
	q.mu.Lock()
	full := q.waiting.ClientFull(client)
	q.mu.Unlock()
	if full { // a flooding client costs no Redis round trip
		return asyqueue.ErrQueueFull
	}
	total := q.queuedInRedis()
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting.Admit(client, total)
}

func (q *Queue) unadmit(client string, t sandbox.Task) {
	if t.Interactive {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting.Leave(client)
}

// queuedInRedis counts the tasks queued in Redis; on error it lets the
// task in (creating it will fail the same way and say so).
func (q *Queue) queuedInRedis() int {
	var queued, incoming *redis.IntCmd
	_, err := q.rdb.Pipelined(q.ctx, func(p redis.Pipeliner) error {
		queued = p.ZCard(q.ctx, q.cfg.Keys.Queue())
		incoming = p.LLen(q.ctx, q.cfg.Keys.Incoming())
		return nil
	})
	if err != nil {
		return 0
	}
	return int(queued.Val() + incoming.Val())
}

func (q *Queue) isTier(d time.Duration) bool {
	for _, t := range q.cfg.Tiers {
		if t.Duration == d {
			return true
		}
	}
	return false
}

// create writes the task into Redis and starts its watcher.
func (q *Queue) create(client string, t sandbox.Task) (*task, error) {
	n, err := q.rdb.Incr(q.ctx, q.cfg.Keys.TaskCounter()).Result()
	if err != nil {
		return nil, fmt.Errorf("task id: %w", err)
	}
	id := strconv.FormatInt(n, 10)
	if err := q.write(id, t); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(q.ctx)
	tk := &task{id: id, ticket: asyqueue.NewTicket(id, client, t.Interactive), client: client,
		timeout: t.Timeout, stop: stop, done: make(chan struct{}), counted: !t.Interactive}
	q.mu.Lock()
	q.tasks[tk.ticket] = tk
	q.mu.Unlock()
	go q.watch(ctx, tk)
	return tk, nil
}

// write puts the task and its files into Redis and its ID on
// queue.incoming, in one transaction.
func (q *Queue) write(id string, t sandbox.Task) error {
	k := q.cfg.Keys
	fields := redisq.OptionsOf(t).Fields()
	fields[redisq.FieldFrontend] = q.cfg.Node
	files := make(map[string]any, len(t.Files))
	for _, f := range t.Files {
		files[f.Name] = f.Data
	}
	_, err := q.rdb.TxPipelined(q.ctx, func(p redis.Pipeliner) error {
		p.HSet(q.ctx, k.Task(id), fields)
		p.PExpire(q.ctx, k.Task(id), redisq.TaskTTL)
		if len(files) > 0 {
			p.HSet(q.ctx, k.TaskFiles(id), files)
			p.PExpire(q.ctx, k.TaskFiles(id), redisq.TaskTTL)
		}
		p.RPush(q.ctx, k.Incoming(), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqSystem is hibiken/asynq on a redis-server the bench starts.
type asynqSystem struct {
	appendfsync   string
	enqueuers     int           // concurrent Enqueue calls in bulk enqueue
	checkInterval time.Duration // Config.TaskCheckInterval
	servers       int           // asynq.Servers the concurrency is split over
	shortCheck    time.Duration // the short DelayedTaskCheckInterval the lateness is measured with
	delayedCheck  time.Duration // Config.DelayedTaskCheckInterval of the next servers (0: asynq's default)

	redis     *redisServer
	rdb       *redis.Client
	client    *asynq.Client
	inspector *asynq.Inspector
	running   []*asynq.Server
}

const asynqQueue = "default"

func (a *asynqSystem) opt(pool int) asynq.RedisClientOpt {
	return asynq.RedisClientOpt{Addr: a.redis.addr, PoolSize: pool}
}

func (a *asynqSystem) setup(ctx context.Context, dir string) error {
	var err error
	if a.redis, err = startRedis(ctx, dir, a.appendfsync); err != nil {
		return err
	}
	a.rdb = redis.NewClient(&redis.Options{Addr: a.redis.addr, ReadTimeout: flushTimeout})
	a.client = asynq.NewClient(a.opt(a.enqueuers + 2))
	a.inspector = asynq.NewInspector(a.opt(4))
	return nil
}

// reset empties redis and starts a new client: a client remembers the
// queues it registered in redis and would not register them again.
func (a *asynqSystem) reset(ctx context.Context) error {
	if err := a.rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	_ = a.client.Close()
	a.client = asynq.NewClient(a.opt(a.enqueuers + 2))
	return nil
}

// noopTask is a task with no payload; asynq deletes it once it succeeded
// (no Retention).
func noopTask() *asynq.Task { return asynq.NewTask("noop", nil) }

// enqueue has no bulk call to use in asynq: each Enqueue is one Lua script
// run. Many concurrent callers on a connection pool of their number keep
// redis busy, the way a pipeline would.
func (a *asynqSystem) enqueue(ctx context.Context, n int) error {
	return enqueueBatches(ctx, n, 1, a.enqueuers, func(ctx context.Context, _ int) error {
		_, err := a.client.EnqueueContext(ctx, noopTask(), asynq.Queue(asynqQueue))
		return err
	})
}

func (a *asynqSystem) enqueueOne(ctx context.Context) error {
	_, err := a.client.EnqueueContext(ctx, noopTask(), asynq.Queue(asynqQueue))
	return err
}

// startWorkers starts a.servers asynq.Servers sharing the concurrency: one
// Server dequeues one task at a time, from one goroutine, so several
// Servers (as several processes would) dequeue in parallel.
func (a *asynqSystem) startWorkers(ctx context.Context, concurrency int, h *hook) error {
	n := max(1, min(a.servers, concurrency))
	handler := asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		h.beginJob(string(t.Payload()))
		h.end()
		return nil
	})
	for i := range n {
		c := concurrency / n
		if i < concurrency%n {
			c++
		}
		srv := asynq.NewServer(a.opt(c+20), asynq.Config{
			Concurrency:       c,
			Queues:            map[string]int{asynqQueue: 1},
			TaskCheckInterval: a.checkInterval,
			// asynq's forwarder moves due scheduled tasks to pending.
			DelayedTaskCheckInterval: a.delayedCheck,
			LogLevel:                 asynq.WarnLevel,
		})
		if err := srv.Start(handler); err != nil {
			return err
		}
		a.running = append(a.running, srv)
	}
	return nil
}

func (a *asynqSystem) stopWorkers(context.Context) error {
	for _, srv := range a.running {
		srv.Shutdown()
	}
	a.running = nil
	return nil
}

func (a *asynqSystem) unfinished(context.Context) (int, error) {
	q, err := a.inspector.GetQueueInfo(asynqQueue)
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return q.Pending + q.Active + q.Scheduled + q.Retry + q.Aggregating, nil
}

func (a *asynqSystem) describe() description {
	d := description{
		Version:    "hibiken/asynq " + moduleVersion("github.com/hibiken/asynq"),
		Durability: fmt.Sprintf("Redis appendonly yes, appendfsync %s, no RDB snapshots", a.appendfsync),
		Tuning: fmt.Sprintf("bulk enqueue: %d concurrent Enqueue calls (asynq has no batch call); workers: %d asynq.Server(s) in the bench process; TaskCheckInterval %s",
			a.enqueuers, a.servers, a.checkInterval),
	}
	if a.redis != nil {
		d.Server = "redis-server " + a.redis.version
	}
	return d
}

func (a *asynqSystem) close() {
	_ = a.stopWorkers(context.Background())
	if a.client != nil {
		_ = a.client.Close()
	}
	if a.inspector != nil {
		_ = a.inspector.Close()
	}
	if a.rdb != nil {
		_ = a.rdb.Close()
	}
	a.redis.stop()
}

// asynqDefaultDelayedCheck is asynq's DelayedTaskCheckInterval when unset.
const asynqDefaultDelayedCheck = 5 * time.Second

// enqueueScheduled enqueues tasks with ProcessAt, concurrently, one Lua
// script run each (asynq has no batch call).
func (a *asynqSystem) enqueueScheduled(ctx context.Context, n int, due func(int) time.Time) error {
	var next atomic.Int64
	return enqueueBatches(ctx, n, 1, a.enqueuers, func(ctx context.Context, _ int) error {
		d := due(int(next.Add(1) - 1))
		_, err := a.client.EnqueueContext(ctx, asynq.NewTask("noop", []byte(payloadDue(d))),
			asynq.Queue(asynqQueue), asynq.ProcessAt(d))
		return err
	})
}

// variants: the forwarder at asynq's default interval, and at a short one.
// asynq takes any positive interval; the shorter, the more often every
// server runs its forwarding script on Redis. A forwarded task then waits
// for a dequeue, which polls every TaskCheckInterval on an empty queue.
func (a *asynqSystem) variants() []variant {
	return []variant{
		{Name: "DelayedTaskCheckInterval 5s (default)", Interval: asynqDefaultDelayedCheck},
		{Name: "DelayedTaskCheckInterval " + a.shortCheck.String(), Interval: a.shortCheck},
	}
}

func (a *asynqSystem) useVariant(v variant) { a.delayedCheck = v.Interval }

// earlyAllowance: asynq keeps a task's due time in whole seconds (its
// score is ProcessAt's Unix time) and forwards it once that second began.
func (a *asynqSystem) earlyAllowance() time.Duration { return time.Second }

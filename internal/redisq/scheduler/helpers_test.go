package scheduler

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
)

// env is a Redis server with schedulers on it; the test itself plays the
// queue servers and the backends with plain commands.
type env struct {
	t    testing.TB
	url  string
	rdb  redis.UniversalClient
	keys redisq.Keys
	logs *testbin.LogBuffer
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return envOn(t, redistest.Start(t).URL())
}

func envOn(t testing.TB, url string) *env {
	t.Helper()
	rdb, err := redisq.Open(context.Background(), url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return &env{t: t, url: url, rdb: rdb, keys: redisq.NewKeys(redisq.DefaultPrefix), logs: &testbin.LogBuffer{}}
}

// node is one running scheduler.
type node struct {
	s      *Scheduler
	cancel context.CancelFunc
	done   chan struct{}
}

// crash stops the node without giving its lease up.
func (n *node) crash(t testing.TB) {
	t.Helper()
	n.cancel()
	testwait.Receive(t, 30*time.Second, n.done, "the crashed scheduler's Run returning")
}

// startScheduler runs a scheduler with short monitor periods; mod adjusts
// its configuration.
func (e *env) startScheduler(name string, mod func(*Config)) *node {
	e.t.Helper()
	rdb, err := redisq.Open(context.Background(), e.url, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { rdb.Close() })
	cfg := Config{Client: rdb, Node: name, MonitorEvery: 100 * time.Millisecond, PendingIdle: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{s: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		if err := s.Run(ctx); err != nil {
			e.t.Errorf("scheduler %s: %v", name, err)
		}
	}()
	e.t.Cleanup(func() { n.crash(e.t) })
	return n
}

// status asks a node for its state.
func (e *env) status(n *node) Status {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := n.s.Status(ctx)
	if err != nil {
		e.t.Fatalf("status: %v", err)
	}
	if st.Invariants != nil {
		e.t.Fatalf("core invariants: %v", st.Invariants)
	}
	return st
}

// waitLeading waits until n leads.
func (e *env) waitLeading(n *node, within time.Duration) {
	e.t.Helper()
	e.waitFor("the scheduler leads", within, func() bool { return e.status(n).Leading })
}

// waitFor polls cond until it holds or the deadline passes.
func (e *env) waitFor(what string, within time.Duration, cond func() bool) {
	e.t.Helper()
	testwait.Eventually(e.t, within, cond, "%s\nscheduler log:\n%s", what, e.logs) // the log as it is at the failure
}

func (e *env) ctx() context.Context { return context.Background() }

// --- standing in for backends ---

// addBackends registers n backends as a backend does and returns their IDs.
func (e *env) addBackends(n int, ttl time.Duration) []string {
	e.t.Helper()
	var ids []string
	for range n {
		id := strconv.FormatInt(e.rdb.Incr(e.ctx(), e.keys.BackendCounter()).Val(), 10)
		pipe := e.rdb.TxPipeline()
		pipe.SAdd(e.ctx(), e.keys.BackendSet(), id)
		pipe.Set(e.ctx(), e.keys.Backend(id), "", ttl)
		pipe.RPush(e.ctx(), e.keys.BackendUpdated(), id)
		if _, err := pipe.Exec(e.ctx()); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// takeTask does what a backend does with the next entry of
// queue.outcoming: read it as the group, then the atomic step (XACK, XDEL,
// SADD queue.processing). It returns the task ID.
func (e *env) takeTask(consumer string) string {
	e.t.Helper()
	id, entry := e.readEntry(consumer)
	pipe := e.rdb.TxPipeline()
	pipe.XAck(e.ctx(), e.keys.Outcoming(), redisq.ConsumerGroup, entry)
	pipe.XDel(e.ctx(), e.keys.Outcoming(), entry)
	pipe.SAdd(e.ctx(), e.keys.Processing(), id)
	if _, err := pipe.Exec(e.ctx()); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// readEntry reads the next entry as the group without taking it.
func (e *env) readEntry(consumer string) (task, entry string) {
	e.t.Helper()
	res, err := e.rdb.XReadGroup(e.ctx(), &redis.XReadGroupArgs{Group: redisq.ConsumerGroup, Consumer: consumer,
		Streams: []string{e.keys.Outcoming(), ">"}, Count: 1, Block: 5 * time.Second}).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 1 {
		e.t.Fatalf("read queue.outcoming: %v %v", res, err)
	}
	m := res[0].Messages[0]
	return m.Values["task"].(string), m.ID
}

// finish ends a taken task as its backend does.
func (e *env) finish(id string) {
	e.t.Helper()
	pipe := e.rdb.TxPipeline()
	pipe.SRem(e.ctx(), e.keys.Processing(), id)
	pipe.RPush(e.ctx(), e.keys.Finished(), id)
	if _, err := pipe.Exec(e.ctx()); err != nil {
		e.t.Fatal(err)
	}
}

// --- standing in for queue servers ---

// submit queues a task as a queue server does: ms is the tier's duration
// (0: a default task).
func (e *env) submit(ms int, interactive bool) string {
	e.t.Helper()
	id := strconv.FormatInt(e.rdb.Incr(e.ctx(), e.keys.TaskCounter()).Val(), 10)
	f := redisq.TaskOptions{Duration: time.Duration(ms) * time.Millisecond, Interactive: interactive, Main: "a.asy"}.Fields()
	e.submitHash(id, f)
	return id
}

func (e *env) submitHash(id string, fields map[string]any) {
	e.t.Helper()
	pipe := e.rdb.TxPipeline()
	pipe.HSet(e.ctx(), e.keys.Task(id), fields)
	pipe.PExpire(e.ctx(), e.keys.Task(id), redisq.TaskTTL)
	pipe.RPush(e.ctx(), e.keys.Incoming(), id)
	if _, err := pipe.Exec(e.ctx()); err != nil {
		e.t.Fatal(err)
	}
}

// endTask deletes a task's keys as its queue server does at the end.
func (e *env) endTask(id string) {
	e.t.Helper()
	if err := e.rdb.Del(e.ctx(), e.keys.TaskKeys(id)...).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// --- reading Redis ---

// outcoming lists the task IDs in queue.outcoming.
func (e *env) outcoming() []string {
	msgs, err := e.rdb.XRange(e.ctx(), e.keys.Outcoming(), "-", "+").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.Values["task"].(string))
	}
	return ids
}

func (e *env) queued() []string { return e.rdb.ZRange(e.ctx(), e.keys.Queue(), 0, -1).Val() }
func (e *env) executing() map[string]string {
	return e.rdb.HGetAll(e.ctx(), e.keys.Executing()).Val()
}
func (e *env) control(id string) []string {
	return e.rdb.LRange(e.ctx(), e.keys.TaskControl(id), 0, -1).Val()
}

// checkLimits fails when queue.executing holds more medium-or-slower or
// slow tasks than the limits.
func (e *env) checkLimits(medium, slow int) {
	e.t.Helper()
	m, s := 0, 0
	for _, v := range e.executing() {
		ms, _ := strconv.Atoi(v)
		if ms >= 10000 {
			m++
		}
		if ms >= 30000 {
			s++
		}
	}
	if m > medium || s > slow {
		e.t.Fatalf("limits broken: %d medium-or-slow (limit %d), %d slow (limit %d): %v", m, medium, s, slow, e.executing())
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// removeBackends unregisters backends as a backend that stops does.
func (e *env) removeBackends(ids []string) {
	e.t.Helper()
	for _, id := range ids {
		pipe := e.rdb.TxPipeline()
		pipe.SRem(e.ctx(), e.keys.BackendSet(), id)
		pipe.Del(e.ctx(), e.keys.Backend(id))
		pipe.RPush(e.ctx(), e.keys.BackendUpdated(), id)
		if _, err := pipe.Exec(e.ctx()); err != nil {
			e.t.Fatal(err)
		}
	}
}

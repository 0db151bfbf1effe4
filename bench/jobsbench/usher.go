package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/client"
)

// usherSystem is usher serve, built from this tree and run as its own
// process on a loopback port with a temp data file, driven through the Go
// client package over real HTTP.
type usherSystem struct {
	bin       string // the usher binary; "" builds one into the temp dir
	batch     int    // jobs per client.Enqueue
	enqueuers int    // concurrent client.Enqueue calls
	agents    int    // client.Workers the concurrency is split over
	// appendfsync, when set, runs multi-node mode instead: a redis-server
	// with this fsync policy, `usher scheduler --redis` (the leader serves
	// /v1 from Redis) and `usher serve --redis` in front, which the client
	// talks to.
	appendfsync string

	redis *redisServer
	sched *child

	dir    string
	token  string
	url    string
	commit string
	child  *child
	c      *client.Client
	stop   context.CancelFunc
	runs   sync.WaitGroup
	runErr chan error
	round  int
}

const usherQueue = "bench"

func newUsherSystem(bin string, batch, enqueuers, agents int) *usherSystem {
	return &usherSystem{bin: bin, batch: batch, enqueuers: enqueuers, agents: agents}
}

func (u *usherSystem) setup(ctx context.Context, dir string) error {
	u.dir = dir
	if u.bin == "" {
		u.bin = filepath.Join(dir, "usher")
		root, err := usherRoot()
		if err != nil {
			return err
		}
		build := exec.CommandContext(ctx, "go", "build", "-o", u.bin, "./cmd/usher")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building usher in %s: %w\n%s", root, err, out)
		}
		if out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
			u.commit = strings.TrimSpace(string(out))
		}
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	u.token = "jobsbench-" + hex.EncodeToString(b)
	if u.appendfsync != "" {
		rdir := filepath.Join(dir, "redis")
		if err := os.MkdirAll(rdir, 0o755); err != nil {
			return err
		}
		var err error
		if u.redis, err = startRedis(ctx, rdir, u.appendfsync); err != nil {
			return err
		}
	}
	return u.start(ctx)
}

// usherRoot is the directory of the usher module this bench replaces
// github.com/usherhq/usher with (../.. of the bench module).
func usherRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/usherhq/usher").Output()
	if err != nil {
		return "", fmt.Errorf("finding usher's source (run from bench/jobsbench, or give -usher-bin): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// start runs usher serve on a fresh data file and creates the queue.
func (u *usherSystem) start(ctx context.Context) error {
	u.round++
	data := filepath.Join(u.dir, fmt.Sprintf("usher-%d.db", u.round))
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"serve", "--listen", addr, "--data", data, "--backends", "0",
		"--log-level", "warn", "--shutdown-grace", "5s"}
	if u.redis != nil {
		// The leading scheduler serves /v1 and holds its tokens.
		if err := u.startScheduler(); err != nil {
			return err
		}
		args = append(args, "--redis", "redis://"+u.redis.addr)
	} else {
		args = append(args, "--admin-token", u.token)
	}
	u.child, err = startChild("usher serve", filepath.Join(u.dir, fmt.Sprintf("usher-%d.log", u.round)), u.dir, nil, syscall.SIGTERM,
		u.bin, args...)
	if err != nil {
		return err
	}
	u.url = "http://" + addr
	u.c = client.New(u.url, u.token)
	// /readyz answers 503 with no Asymptote backend; /v1 is what counts.
	err = waitUp(ctx, u.child, func(ctx context.Context) error {
		_, err := u.c.Queues(ctx)
		return err
	})
	if err != nil {
		return err
	}
	_, err = u.c.CreateQueue(ctx, client.QueueSpec{Name: usherQueue})
	return err
}

// startScheduler runs the leading scheduler of multi-node mode.
func (u *usherSystem) startScheduler() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	u.sched, err = startChild("usher scheduler", filepath.Join(u.dir, fmt.Sprintf("scheduler-%d.log", u.round)), u.dir, nil, syscall.SIGTERM,
		u.bin, "scheduler", "--redis", "redis://"+u.redis.addr, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--admin-token", u.token, "--log-level", "warn")
	return err
}

// reset starts a new server on a new data file (and, in multi-node mode,
// on an emptied Redis): the anchors' stores are emptied too (FLUSHALL,
// TRUNCATE), and usher keeps finished jobs.
func (u *usherSystem) reset(ctx context.Context) error {
	u.child.stop(syscall.SIGTERM)
	if u.redis != nil {
		u.sched.stop(syscall.SIGTERM)
		rc := redis.NewClient(&redis.Options{Addr: u.redis.addr, ReadTimeout: flushTimeout})
		err := rc.FlushAll(ctx).Err()
		rc.Close()
		if err != nil {
			return err
		}
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(filepath.Join(u.dir, fmt.Sprintf("usher-%d.db%s", u.round, suffix)))
	}
	return u.start(ctx)
}

func (u *usherSystem) specs(n int) []client.JobSpec {
	s := make([]client.JobSpec, n)
	for i := range s {
		s[i] = client.JobSpec{Queue: usherQueue}
	}
	return s
}

// enqueue calls client.Enqueue (POST /v1/jobs) with batches of jobs.
func (u *usherSystem) enqueue(ctx context.Context, n int) error {
	return enqueueBatches(ctx, n, u.batch, u.enqueuers, func(ctx context.Context, size int) error {
		ids, err := u.c.Enqueue(ctx, u.specs(size)...)
		if err == nil && len(ids) != size {
			err = fmt.Errorf("enqueue answered %d ids for %d jobs", len(ids), size)
		}
		return err
	})
}

func (u *usherSystem) enqueueOne(ctx context.Context) error {
	_, err := u.c.Enqueue(ctx, client.JobSpec{Queue: usherQueue})
	return err
}

// startWorkers runs client.Workers (agents) sharing the concurrency.
func (u *usherSystem) startWorkers(ctx context.Context, concurrency int, h *hook) error {
	ctx, u.stop = context.WithCancel(ctx)
	agents := max(1, min(u.agents, concurrency))
	u.runErr = make(chan error, agents)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for i := range agents {
		w := &client.Worker{
			Client:      u.c,
			Agent:       "jobsbench-" + strconv.Itoa(i),
			Concurrency: concurrency / agents,
			Handlers: map[string]client.Handler{usherQueue: func(_ context.Context, j *client.LeasedJob) (string, error) {
				h.beginJob(string(j.Payload))
				h.end()
				return "", nil
			}},
			Logger: logger,
		}
		if i < concurrency%agents {
			w.Concurrency++
		}
		u.runs.Add(1)
		go func() {
			defer u.runs.Done()
			if err := w.Run(ctx); err != nil {
				u.runErr <- err
				h.fail(err)
			}
		}()
	}
	return nil
}

func (u *usherSystem) stopWorkers(context.Context) error {
	if u.stop == nil {
		return nil
	}
	u.stop()
	u.runs.Wait()
	u.stop = nil
	select {
	case err := <-u.runErr:
		return err
	default:
		return nil
	}
}

// unfinished sums the queue's jobs that are not finished, from /v1/stats.
func (u *usherSystem) unfinished(ctx context.Context) (int, error) {
	st, err := u.c.Stats(ctx)
	if err != nil {
		return 0, err
	}
	for _, q := range st.Queues {
		if q.Name == usherQueue {
			return q.Queued + q.Running + q.Waiting + q.Delayed, nil
		}
	}
	return 0, errors.New("no stats for the bench queue")
}

func (u *usherSystem) describe() description {
	v := "usher (this tree)"
	if u.commit != "" {
		v = "usher " + u.commit
	}
	if u.redis != nil {
		return description{
			Version: v + ", redis " + u.redis.version,
			Server:  "usher serve --redis (queue server) passing /v1 to usher scheduler --redis (the leader), separate processes",
			Durability: fmt.Sprintf("Redis AOF, appendfsync %s (a batch of changes is acknowledged once Redis ran its script)",
				u.appendfsync),
			Tuning: fmt.Sprintf("bulk enqueue: client.Enqueue (POST /v1/jobs), batches of %d, %d at once; workers: client.Worker, %d agent(s)",
				u.batch, u.enqueuers, u.agents),
		}
	}
	return description{
		Version:    v,
		Server:     "usher serve --backends 0 (a separate process)",
		Durability: "SQLite WAL, synchronous=NORMAL",
		Tuning: fmt.Sprintf("bulk enqueue: client.Enqueue (POST /v1/jobs), batches of %d, %d at once; workers: client.Worker, %d agent(s)",
			u.batch, u.enqueuers, u.agents),
	}
}

func (u *usherSystem) close() {
	_ = u.stopWorkers(context.Background())
	if u.child != nil {
		u.child.stop(syscall.SIGTERM)
	}
	if u.sched != nil {
		u.sched.stop(syscall.SIGTERM)
	}
	u.redis.stop()
}

// scheduledSpec is a JobSpec with a due time, as the wire has it: runAt
// (RFC 3339); the job waits in state scheduled until then.
type scheduledSpec struct {
	client.JobSpec
	RunAt string `json:"runAt"`
}

// enqueueScheduled posts batches of jobs with runAt to /v1/jobs, and checks
// that the server keeps the first job it answered for scheduled: an usher
// that does not know runAt refuses the field, and one that ignored it
// would run the jobs at once.
func (u *usherSystem) enqueueScheduled(ctx context.Context, n int, due func(int) time.Time) error {
	var next sync.Mutex
	var checked atomic.Bool
	i := 0
	take := func(size int) []scheduledSpec {
		next.Lock()
		defer next.Unlock()
		specs := make([]scheduledSpec, size)
		for k := range specs {
			d := due(i)
			i++
			specs[k] = scheduledSpec{JobSpec: client.JobSpec{Queue: usherQueue, Payload: json.RawMessage(payloadDue(d))},
				RunAt: d.UTC().Format(time.RFC3339Nano)}
		}
		return specs
	}
	return enqueueBatches(ctx, n, u.batch, u.enqueuers, func(ctx context.Context, size int) error {
		ids, err := u.postJobs(ctx, take(size))
		if err != nil {
			return err
		}
		if len(ids) != size {
			return fmt.Errorf("enqueue answered %d ids for %d jobs", len(ids), size)
		}
		if checked.Swap(true) {
			return nil
		}
		j, err := u.c.Job(ctx, ids[0])
		if err != nil {
			return err
		}
		if j.State != "scheduled" {
			return fmt.Errorf("a job enqueued with runAt is %s, not scheduled: this usher does not schedule jobs", j.State)
		}
		return nil
	})
}

// postJobs is POST /v1/jobs with a body the client package has no type for.
func (u *usherSystem) postJobs(ctx context.Context, specs []scheduledSpec) ([]string, error) {
	body, err := json.Marshal(map[string]any{"jobs": specs})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+u.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		IDs   []string `json:"ids"`
		Error string   `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("POST /v1/jobs: %s: %w", resp.Status, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("POST /v1/jobs with runAt: %s: %s", resp.Status, out.Error)
	}
	return out.IDs, nil
}

// variants: usher's engine sleeps until the next due time; there is no
// interval to set.
func (u *usherSystem) variants() []variant {
	return []variant{{Name: "wakes at the next due time"}}
}

func (u *usherSystem) useVariant(variant) {}

func (u *usherSystem) earlyAllowance() time.Duration { return 0 }

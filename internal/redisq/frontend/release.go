package frontend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
)

// releaseTimeout bounds the Redis work of ending one task.
const releaseTimeout = 5 * time.Second

// abortScript ends a task whose session never dialled a backend. When no
// backend took it, its ID goes to queue.finished so that the scheduler
// forgets it at once. When one did (its address is waiting in
// task:ID:backend), the address is returned: that backend frees its slot
// itself once the session's connection closes. Either way every key of the
// task is deleted.
//
// KEYS: task, files, backend, estimate, control, queue.finished. ARGV: ID.
var abortScript = redis.NewScript(`
local address = redis.call('LINDEX', KEYS[3], 0)
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
if address then return address end
redis.call('RPUSH', KEYS[6], ARGV[1])
return false
`)

// Release ends the task: the watcher stops and the task's keys are
// deleted. A task whose backend was never dialled is taken back from the
// scheduler: it was aborted before its backend's address was delivered
// (docs/design.md, "Multi-node mode: roles and keys").
func (q *Queue) Release(t *asyqueue.Ticket, _ bool) {
	q.mu.Lock()
	tk := q.tasks[t]
	delete(q.tasks, t)
	q.mu.Unlock()
	if tk == nil {
		return
	}
	q.uncount(tk)
	tk.stop()
	<-tk.done
	end := q.abort
	if tk.backendAddress() != "" {
		end = q.deleteKeys
	}
	if err := q.attempt(tk, end); err != nil {
		q.cfg.Logger.Warn("asy: task keys not deleted; retrying in the background", "task", tk.id, "err", err)
		go q.retry(tk, end)
	}
}

// attempt runs one try of end within releaseTimeout.
func (q *Queue) attempt(tk *task, end func(context.Context, *task) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.ctx), releaseTimeout)
	defer cancel()
	return end(ctx, tk)
}

// retry runs end again, with backoff, until it succeeds, the task's keys
// would have expired anyway, or the queue server stops: a running task's
// task:ID left in Redis would keep its slot taken in the scheduler
// (docs/redis.md, "Faults").
func (q *Queue) retry(tk *task, end func(context.Context, *task) error) {
	deadline := time.Now().Add(redisq.TaskTTL)
	for wait := 200 * time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, 5*time.Second) {
		select {
		case <-q.ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := q.attempt(tk, end); err == nil {
			q.cfg.Logger.Info("asy: task keys deleted after a retry", "task", tk.id)
			return
		}
	}
}

// uncount stops counting a task that left the queue toward its client's cap.
func (q *Queue) uncount(tk *task) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if tk.counted {
		tk.counted = false
		q.waiting.Leave(tk.client)
	}
}

func (q *Queue) deleteKeys(ctx context.Context, tk *task) error {
	if err := q.rdb.Del(ctx, q.cfg.Keys.TaskKeys(tk.id)...).Err(); err != nil {
		return fmt.Errorf("delete the keys of task %s: %w", tk.id, err)
	}
	return nil
}

func (q *Queue) abort(ctx context.Context, tk *task) error {
	k := q.cfg.Keys
	keys := append(k.TaskKeys(tk.id), k.Finished())
	address, err := abortScript.Run(ctx, q.rdb, keys, tk.id).Text()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return fmt.Errorf("take task %s back: %w", tk.id, err)
	default:
		go hangUp(address) // the backend took it: end its run at once
	}
	return nil
}

// hangUp connects to a backend that took a task nobody will follow and
// closes at once, which aborts the run and frees the backend.
func hangUp(address string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, address, nil)
	if err == nil {
		ws.CloseNow()
	}
}

package frontend

import (
	"context"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.ctx), releaseTimeout)
	defer cancel()
	if tk.backendAddress() != "" {
		q.deleteKeys(ctx, tk)
		return
	}
	q.abort(ctx, tk)
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

func (q *Queue) deleteKeys(ctx context.Context, tk *task) {
	if err := q.rdb.Del(ctx, q.cfg.Keys.TaskKeys(tk.id)...).Err(); err != nil {
		q.cfg.Logger.Warn("asy: task keys not deleted", "task", tk.id, "err", err)
	}
}

func (q *Queue) abort(ctx context.Context, tk *task) {
	k := q.cfg.Keys
	keys := append(k.TaskKeys(tk.id), k.Finished())
	address, err := abortScript.Run(ctx, q.rdb, keys, tk.id).Text()
	switch {
	case err == redis.Nil:
	case err != nil:
		q.cfg.Logger.Warn("asy: task not taken back", "task", tk.id, "err", err)
	default:
		go hangUp(address) // the backend took it: end its run at once
	}
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

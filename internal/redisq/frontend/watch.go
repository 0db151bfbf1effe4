package frontend

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
)

// unavailableFor is how long Redis may fail a task's reads before the task
// ends with RedisDownText.
const unavailableFor = 30 * time.Second

// watch waits on the task's three lists and passes what arrives to its
// session: estimates, the backend's address, the scheduler's decisions.
// It keeps the task's keys alive until ctx ends.
func (q *Queue) watch(ctx context.Context, tk *task) {
	defer close(tk.done)
	k := q.cfg.Keys
	lists := []string{k.TaskControl(tk.id), k.TaskBackend(tk.id), k.TaskEstimate(tk.id)}
	renewAt := time.Now().Add(q.cfg.Renew)
	newsAt := time.Now()
	var failingSince time.Time
	for ctx.Err() == nil {
		got, err := q.rdb.BLPop(ctx, q.cfg.Wait, lists...).Result()
		if time.Now().After(renewAt) {
			q.renew(ctx, tk)
			renewAt = time.Now().Add(q.cfg.Renew)
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			if q.failing(ctx, tk, err, &failingSince) {
				return
			}
			continue
		}
		// A waiting task that hears nothing checks that Redis still holds
		// it: when Redis answers again after failing, and after cfg.Quiet
		// (a restart the client library retried through).
		recovered := !failingSince.IsZero()
		failingSince = time.Time{}
		if errors.Is(err, redis.Nil) {
			if len(lists) == 1 || (!recovered && time.Since(newsAt) <= q.cfg.Quiet) {
				continue
			}
			newsAt = time.Now()
			ended, address := q.place(ctx, tk)
			if ended {
				return
			}
			if address == "" {
				continue
			}
			got = []string{lists[1], address}
		}
		newsAt = time.Now()
		switch got[0] {
		case lists[0]:
			q.control(tk, got[1])
		case lists[1]:
			q.uncount(tk)
			tk.started(got[1])
			lists = lists[:1] // from now on only the scheduler's decisions matter
		default:
			q.estimate(ctx, tk, got[1])
		}
	}
	if q.ctx.Err() != nil {
		tk.ticket.PostEnd(asyqueue.ErrStopped.Error())
	}
}

// failing logs a read error and waits a moment; it ends the task and
// reports true once Redis has failed for unavailableFor.
func (q *Queue) failing(ctx context.Context, tk *task, err error, since *time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	if since.IsZero() {
		*since = time.Now()
		q.cfg.Logger.Warn("asy: redis read failed", "task", tk.id, "err", err)
	}
	if time.Since(*since) > unavailableFor {
		tk.ticket.PostEnd(asyqueue.RedisDownText)
		return true
	}
	select {
	case <-ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
	return false
}

// placeScript says where a waiting task is after Redis came back: "gone"
// when its hash is, "held" when the scheduler or a backend still has it
// (queue.incoming, queue, queue.executing, or a message waiting for the
// queue server), "lost" otherwise. A backend that took the task (its ID in
// the hash) while no address waits means the address was delivered to a
// read that Redis's restart cut off: the script returns the address the
// backend also wrote into the hash ("lost" if there is none).
//
// KEYS: task, backend, control, estimate, queue.incoming, queue,
// queue.executing. ARGV: ID.
var placeScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
if redis.call('LLEN', KEYS[2]) > 0 or redis.call('LLEN', KEYS[3]) > 0 or redis.call('LLEN', KEYS[4]) > 0 then
  return 'held'
end
if redis.call('HEXISTS', KEYS[1], 'backend') == 1 then
  return redis.call('HGET', KEYS[1], 'address') or 'lost'
end
if redis.call('ZSCORE', KEYS[6], ARGV[1]) then return 'held' end
if redis.call('HEXISTS', KEYS[7], ARGV[1]) == 1 then return 'held' end
if redis.call('LPOS', KEYS[5], ARGV[1]) then return 'held' end
return 'lost'
`)

// place checks, once Redis answers again after failing, that the waiting
// task is still somewhere in Redis. A task Redis lost (restarted empty, or
// from a file that missed it) ends at once with TaskLostText instead of
// waiting for news that never comes (ended); a task whose backend's
// address was lost with a read returns that address from the task hash.
func (q *Queue) place(ctx context.Context, tk *task) (ended bool, address string) {
	k := q.cfg.Keys
	keys := []string{k.Task(tk.id), k.TaskBackend(tk.id), k.TaskControl(tk.id), k.TaskEstimate(tk.id),
		k.Incoming(), k.Queue(), k.Executing()}
	place, err := placeScript.Run(ctx, q.rdb, keys, tk.id).Text()
	switch {
	case err != nil:
		q.cfg.Logger.Warn("asy: cannot tell whether redis kept the task", "task", tk.id, "err", err)
		return false, ""
	case place == "held":
		return false, ""
	case place == "gone" || place == "lost":
		q.cfg.Logger.Warn("asy: redis lost the task", "task", tk.id, "place", place)
		tk.ticket.PostEnd(asyqueue.TaskLostText)
		return true, ""
	}
	q.cfg.Logger.Info("asy: backend address recovered from the task hash", "task", tk.id)
	return false, place
}

// started passes the backend's address to the session.
func (tk *task) started(address string) {
	tk.mu.Lock()
	tk.address = address
	tk.mu.Unlock()
	tk.ticket.PostStart(asyqueue.Start{
		Backend:   &backend.Remote{URL: address, Attached: true},
		BackendID: address,
		Timeout:   tk.timeout,
	})
}

// control acts on one of the scheduler's decisions.
func (q *Queue) control(tk *task, msg string) {
	c, err := redisq.ParseControl(msg)
	if err != nil {
		q.cfg.Logger.Warn("asy: bad control message", "task", tk.id, "err", err)
		return
	}
	switch c.Kind {
	case redisq.ControlTimeout:
		tk.ticket.PostShorten(c.Timeout)
	case redisq.ControlDenied, redisq.ControlEnd:
		tk.ticket.PostEnd(c.Text)
	}
}

// estimate passes a queue estimate and the task's position to the session.
func (q *Queue) estimate(ctx context.Context, tk *task, msg string) {
	wait, known, err := redisq.ParseEstimate(msg)
	if err != nil {
		q.cfg.Logger.Warn("asy: bad queue estimate", "task", tk.id, "err", err)
		return
	}
	pos, err := q.rdb.HGet(ctx, q.cfg.Keys.Task(tk.id), redisq.FieldPosition).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		q.cfg.Logger.Debug("asy: queue position unread", "task", tk.id, "err", err)
	}
	tk.ticket.PostEstimate(asyqueue.Estimate{Wait: wait, Known: known, Position: pos})
}

// renew keeps task:ID alive, and task:ID:files until a backend has it.
func (q *Queue) renew(ctx context.Context, tk *task) {
	k := q.cfg.Keys
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.PExpire(ctx, k.Task(tk.id), redisq.TaskTTL)
		if tk.backendAddress() == "" {
			p.PExpire(ctx, k.TaskFiles(tk.id), redisq.TaskTTL)
		}
		return nil
	})
	if err != nil {
		q.cfg.Logger.Warn("asy: task keys not renewed", "task", tk.id, "err", err)
	}
}

func (tk *task) backendAddress() string {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return tk.address
}

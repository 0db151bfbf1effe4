package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/sched"
)

// takeIncoming takes the new task IDs: it reads them, then one fenced
// script takes exactly those from queue.incoming and queues them (their
// task hashes are keys the script must be given).
func (l *leader) takeIncoming(ctx context.Context) error {
	k := l.s.keys
	ids, err := l.s.rdb.LRange(ctx, k.Incoming(), 0, maxBatch-1).Result()
	if err != nil {
		return fmt.Errorf("read queue.incoming: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, 0, 4+len(ids))
	keys = append(keys, k.Leader(), k.Incoming(), k.Queue(), k.Executing())
	args := make([]any, 0, 3+len(ids))
	args = append(args, l.token, l.valid, len(ids))
	for _, id := range ids {
		keys = append(keys, k.Task(id))
		args = append(args, id)
	}
	v, err := runScript(ctx, l.s.rdb, takeIncomingScript, "take queue.incoming", keys, args...)
	if err != nil {
		return err
	}
	res, err := reply(v, len(ids), "take queue.incoming")
	if err != nil {
		return err
	}
	for i, id := range ids {
		f := asStrings(res[i])
		if len(f) != 2 {
			return fmt.Errorf("take queue.incoming: unexpected reply %v", res[i])
		}
		l.admit(id, f[0], f[1])
	}
	return nil
}

// admit acts on the verdict of takeIncomingScript for one ID.
func (l *leader) admit(id, verdict, duration string) {
	log := l.s.log.With("task", quoteID(id))
	switch verdict {
	case "gone":
		log.Info("queue.incoming: no task hash for this ID (aborted, or not a task); ignored")
	case "dup":
		log.Warn("queue.incoming: task already queued or running; ignored")
	case "bad":
		log.Warn("queue.incoming: malformed task hash; denied", "duration", duration)
		l.deny(id, invalidText)
	case "interactive":
		l.startInteractive(id, log)
	case "queued":
		l.enqueue(id, duration, log)
	default:
		log.Error("queue.incoming: unknown verdict", "verdict", verdict)
	}
}

func (l *leader) deny(id, text string) {
	l.s.recent.Add(l.s.cfg.Now(), "denial", id, text)
	l.ops = append(l.ops, op{kind: "deny", id: id, b: redisq.Control{Kind: redisq.ControlDenied, Text: text}.String()})
}

func (l *leader) enqueue(id, duration string, log *slog.Logger) {
	spec, _ := l.specOf(id, duration) // the script checked the duration
	if err := l.core.Submit(spec); err != nil {
		log.Error("queue.incoming: the core refused the task; dropped", "err", err)
		l.ops = append(l.ops, op{kind: "drop", id: id})
		l.deny(id, invalidText)
		return
	}
	l.tasks[id] = &task{class: l.classOf(duration, false)}
	l.queued++
	l.fresh = true
}

// startInteractive starts an interactive task at once or denies it.
func (l *leader) startInteractive(id string, log *slog.Logger) {
	a, err := l.core.StartInteractive(sched.JobSpec{ID: id, Queue: asyqueue.QueueName})
	switch {
	case errors.Is(err, sched.ErrDenied):
		l.s.log.Info("interactive task denied: no free backend", "task", quoteID(id))
		l.deny(id, asyqueue.ErrNoBackend.Error())
	case err != nil:
		log.Error("queue.incoming: the core refused the interactive task", "err", err)
		l.deny(id, invalidText)
	default:
		l.assigned(a)
	}
}

// takeFinished frees the slots (or queue places) of finished tasks.
func (l *leader) takeFinished(ctx context.Context) error {
	k := l.s.keys
	v, err := runScript(ctx, l.s.rdb, takeFinishedScript, "take queue.finished",
		[]string{k.Leader(), k.Finished(), k.Queue(), k.Executing()}, l.token, maxBatch)
	if err != nil {
		return err
	}
	res, err := reply(v, 2, "take queue.finished")
	if err != nil {
		return err
	}
	items, _ := res[0].([]any)
	for _, it := range items {
		x, _ := it.([]any)
		if len(x) != 3 {
			return fmt.Errorf("take queue.finished: unexpected reply %v", it)
		}
		id, _ := x[0].(string)
		l.finish(id, asInt(x[1]) == 1, asInt(x[2]) == 1)
	}
	return nil
}

// finish ends a task the core holds: a running one completes, a queued one
// leaves the queue.
func (l *leader) finish(id string, inQueue, inExecuting bool) {
	t := l.tasks[id]
	if t == nil {
		if inQueue || inExecuting {
			l.s.log.Warn("queue.finished: Redis held this task but the core did not; freed in Redis", "task", quoteID(id))
		} else {
			l.s.log.Info("queue.finished: task holds no slot (already freed, or not a task); ignored", "task", quoteID(id))
		}
		return
	}
	if !t.running {
		l.free(id)
		return
	}
	delete(l.tasks, id)
	l.core.Complete(id, t.attempt, sched.Succeeded)
	l.s.ended.Add(l.s.cfg.Now())
}

// takeUpdated recounts the live backends after arrivals and departures.
func (l *leader) takeUpdated(ctx context.Context) error {
	k := l.s.keys
	v, err := runScript(ctx, l.s.rdb, takeUpdatedScript, "take backend.updated",
		[]string{k.Leader(), k.BackendUpdated(), k.BackendSet()}, l.token)
	if err != nil {
		return err
	}
	res, err := reply(v, 2, "take backend.updated")
	if err != nil {
		return err
	}
	return l.setBackends(int(asInt(res[1])))
}

// setBackends makes the push worker's slots the live backend count; with
// none, the worker goes and the tasks it ran end.
func (l *leader) setBackends(n int) error {
	if n == l.backends {
		return nil
	}
	var err error
	if n > 0 {
		err = l.core.AddWorker(sched.WorkerSpec{ID: workerID, Slots: n, Push: true})
	} else {
		err = l.core.RemoveWorker(workerID)
	}
	if err != nil {
		return fmt.Errorf("core: backends %d: %w", n, err)
	}
	l.backends = n
	l.fresh = true
	l.s.log.Info("live backends", "count", n, "limits", l.core.TierLimits())
	return nil
}

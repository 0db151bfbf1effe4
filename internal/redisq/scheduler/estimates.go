package scheduler

import (
	"context"
	"time"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
)

// freshEstimateGap is the shortest time between two estimate passes that
// a change of the queue starts.
const freshEstimateGap = 250 * time.Millisecond

// estimates tells each queued task its wait and position when it has none
// yet, its position moved, its wait changed noticeably or it was last told
// EstimateResend ago: one fenced script per batch.
func (l *leader) estimates(ctx context.Context) error {
	l.fresh, l.estimatedAt = false, l.s.cfg.Now()
	if l.queued <= 0 {
		return nil
	}
	es, err := l.core.Estimates(asyqueue.QueueName, l.queued)
	if err != nil {
		return nil // the queue always exists
	}
	now := l.s.cfg.Now()
	k := l.s.keys
	keys := []string{k.Leader()}
	args := []any{l.token, redisq.TaskTTL.Milliseconds()}
	for _, e := range es {
		t := l.tasks[e.JobID]
		if t == nil || t.running {
			continue
		}
		if t.told && e.Position == t.sent.Position && !e.ChangedFrom(t.sent) && now.Sub(t.sentAt) < l.s.cfg.EstimateResend {
			continue
		}
		t.told, t.sent, t.sentAt = true, e, now
		keys = append(keys, k.Task(e.JobID), k.TaskEstimate(e.JobID))
		args = append(args, e.Position, redisq.FormatEstimate(e.Wait, e.Known))
		if len(keys) > 2*maxBatch {
			if _, err := runScript(ctx, l.s.rdb, estimateScript, "send estimates", keys, args...); err != nil {
				return err
			}
			keys, args = keys[:1], args[:2]
		}
	}
	if len(keys) == 1 {
		return nil
	}
	_, err = runScript(ctx, l.s.rdb, estimateScript, "send estimates", keys, args...)
	return err
}

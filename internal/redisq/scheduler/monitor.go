package scheduler

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
)

// monitor looks for work lost by processes that died: entries of
// queue.outcoming a backend read but never took, tasks of queue.processing
// whose hash is gone, backends whose heartbeat expired.
func (l *leader) monitor(ctx context.Context) error {
	if err := l.abortPending(ctx); err != nil {
		return err
	}
	if err := l.sweepProcessing(ctx); err != nil {
		return err
	}
	return l.sweepBackends(ctx)
}

// ensureGroup creates the backends' consumer group from the start of the
// stream, so that entries added before the first backend came are read.
func (l *leader) ensureGroup(ctx context.Context) error {
	err := l.s.rdb.XGroupCreateMkStream(ctx, l.s.keys.Outcoming(), redisq.ConsumerGroup, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group: %w", err)
	}
	return nil
}

// abortPending ends the tasks whose queue.outcoming entry was delivered
// to a backend PendingIdle ago or more and never acknowledged: the backend
// died between reading and taking it.
func (l *leader) abortPending(ctx context.Context) error {
	k := l.s.keys
	pend, err := l.s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k.Outcoming(), Group: redisq.ConsumerGroup,
		Idle: l.s.cfg.PendingIdle, Start: "-", End: "+", Count: maxBatch}).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		return l.ensureGroup(ctx)
	}
	if err != nil {
		return fmt.Errorf("read pending entries: %w", err)
	}
	if len(pend) == 0 {
		return nil
	}
	ids, err := l.entryTasks(ctx, pend)
	if err != nil {
		return err
	}
	keys := []string{k.Leader(), k.Outcoming(), k.Executing()}
	args := []any{l.token, redisq.ConsumerGroup, redisq.TaskTTL.Milliseconds(),
		redisq.Control{Kind: redisq.ControlEnd, Text: asyqueue.BackendLostText}.String()}
	for i, p := range pend {
		keys = append(keys, k.Task(ids[i]), k.TaskControl(ids[i]))
		args = append(args, p.ID, ids[i])
	}
	if _, err := runScript(ctx, l.s.rdb, abortPendingScript, "abort pending entries", keys, args...); err != nil {
		return err
	}
	for i, p := range pend {
		l.s.log.Warn("queue.outcoming: a backend read this entry and never took it; task aborted",
			"entry", p.ID, "consumer", p.Consumer, "idle", p.Idle, "task", quoteID(ids[i]))
		l.free(ids[i])
	}
	return nil
}

// entryTasks reads the task ID of each pending entry ("" for an entry
// that is gone or names no task).
func (l *leader) entryTasks(ctx context.Context, pend []redis.XPendingExt) ([]string, error) {
	pipe := l.s.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(pend))
	for i, p := range pend {
		cmds[i] = pipe.XRange(ctx, l.s.keys.Outcoming(), p.ID, p.ID)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read pending entries: %w", err)
	}
	ids := make([]string, len(pend))
	for i, c := range cmds {
		if msgs := c.Val(); len(msgs) == 1 {
			ids[i], _ = msgs[0].Values["task"].(string)
		}
		if ids[i] == "" {
			l.s.log.Warn("queue.outcoming: pending entry names no task; dropped", "entry", pend[i].ID)
		}
	}
	return ids, nil
}

// sweepProcessing frees the slots of taken tasks whose hash is gone (their
// queue server ended them and the backend never reported).
func (l *leader) sweepProcessing(ctx context.Context) error {
	k := l.s.keys
	ids, err := l.s.rdb.SMembers(ctx, k.Processing()).Result()
	if err != nil {
		return fmt.Errorf("read queue.processing: %w", err)
	}
	for len(ids) > 0 {
		n := min(len(ids), maxBatch)
		keys := []string{k.Leader(), k.Processing(), k.Executing()}
		args := []any{l.token}
		for _, id := range ids[:n] {
			keys = append(keys, k.Task(id))
			args = append(args, id)
		}
		v, err := runScript(ctx, l.s.rdb, sweepProcessingScript, "sweep queue.processing", keys, args...)
		if err != nil {
			return err
		}
		for _, id := range asStrings(v) {
			l.s.log.Warn("queue.processing: task hash gone; slot freed", "task", quoteID(id))
			l.free(id)
		}
		ids = ids[n:]
	}
	return nil
}

// sweepBackends removes backends whose heartbeat expired and lowers the
// slots to the live count.
func (l *leader) sweepBackends(ctx context.Context) error {
	k := l.s.keys
	ids, err := l.s.rdb.SMembers(ctx, k.BackendSet()).Result()
	if err != nil {
		return fmt.Errorf("read backend.set: %w", err)
	}
	keys := []string{k.Leader(), k.BackendSet()}
	args := []any{l.token}
	for _, id := range ids {
		keys = append(keys, k.Backend(id))
		args = append(args, id)
	}
	v, err := runScript(ctx, l.s.rdb, sweepBackendsScript, "sweep backend.set", keys, args...)
	if err != nil {
		return err
	}
	res, err := reply(v, 2, "sweep backend.set")
	if err != nil {
		return err
	}
	for _, id := range asStrings(res[0]) {
		l.s.log.Warn("backend.set: heartbeat expired; backend removed", "backend", quoteID(id))
	}
	return l.setBackends(int(asInt(res[1])))
}

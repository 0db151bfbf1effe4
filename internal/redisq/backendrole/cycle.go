package backendrole

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/redisq"
)

// streamField is the field of a queue.outcoming entry that names the task.
const streamField = "task"

// cycle waits for one task and runs it to the end. A wait that ends with
// no task is a cycle too.
func (r *Role) cycle(ctx context.Context) error {
	msg, ok, err := r.read(ctx)
	if err != nil || !ok {
		return err
	}
	// An entry delivered to this consumer is taken even if ctx ended
	// meanwhile (Run then drains it): left pending, it would wait for the
	// scheduler to declare it lost.
	rctx := context.WithoutCancel(ctx)
	taskID, _ := msg.Values[streamField].(string)
	if taskID == "" {
		return r.dropForeign(rctx, msg)
	}
	j, err := newJob(r, taskID)
	if err != nil {
		return err
	}
	r.setCurrent(j) // before the URL is published: the queue server may dial at once
	defer r.setCurrent(nil)
	hash, err := r.take(rctx, msg.ID, j)
	if err != nil || hash == nil {
		j.abandon(internalError)
		return err
	}
	r.runJob(ctx, j, hash)
	return r.release(ctx, taskID)
}

// read waits up to Block for the next entry of queue.outcoming for this
// consumer; ok is false when none came.
func (r *Role) read(ctx context.Context) (msg redis.XMessage, ok bool, err error) {
	streams, err := r.cfg.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: redisq.ConsumerGroup, Consumer: r.id, Streams: []string{r.cfg.Keys.Outcoming(), ">"},
		Count: 1, Block: r.cfg.Block,
	}).Result()
	switch {
	case errors.Is(err, redis.Nil) || (err != nil && ctx.Err() != nil):
		return msg, false, nil
	case redis.HasErrorPrefix(err, "NOGROUP"): // the stream was deleted
		return msg, false, r.createGroup(ctx)
	case err != nil:
		return msg, false, fmt.Errorf("backendrole: read %s: %w", r.cfg.Keys.Outcoming(), err)
	}
	for _, s := range streams {
		for _, m := range s.Messages {
			return m, true, nil
		}
	}
	return msg, false, nil
}

// dropForeign acknowledges and deletes an entry that names no task.
func (r *Role) dropForeign(ctx context.Context, msg redis.XMessage) error {
	r.log.Warn("backend: skipping a queue.outcoming entry without a task", "entry", msg.ID, "values", msg.Values)
	k := r.cfg.Keys.Outcoming()
	_, err := r.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, k, redisq.ConsumerGroup, msg.ID)
		p.XDel(ctx, k, msg.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("backendrole: drop entry %s: %w", msg.ID, err)
	}
	return nil
}

// takeScript is the backend's atomic take
// (docs/design.md, "Multi-node mode: roles and keys").
// KEYS: queue.outcoming, queue.processing, task:ID, task:ID:backend,
// queue.finished. ARGV: entry ID, group, task ID, backend ID, URL,
// expiry of task:ID:backend in ms.
// It returns the task hash, or false when task:ID is gone (its ID then
// goes to queue.finished, so that the scheduler frees the slot).
var takeScript = redis.NewScript(`
redis.call('XACK', KEYS[1], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('RPUSH', KEYS[5], ARGV[3])
  return false
end
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('HSET', KEYS[3], 'backend', ARGV[4], 'address', ARGV[5])
redis.call('RPUSH', KEYS[4], ARGV[5])
redis.call('PEXPIRE', KEYS[4], ARGV[6])
return redis.call('HGETALL', KEYS[3])`)

// take runs takeScript for entry and j's task. A nil hash and nil error
// mean the task was gone.
func (r *Role) take(ctx context.Context, entry string, j *job) (map[string]string, error) {
	k := r.cfg.Keys
	keys := []string{k.Outcoming(), k.Processing(), k.Task(j.task), k.TaskBackend(j.task), k.Finished()}
	res, err := takeScript.Run(ctx, r.cfg.Redis, keys, entry, redisq.ConsumerGroup, j.task, r.id,
		j.url, redisq.TaskTTL.Milliseconds()).Slice()
	if errors.Is(err, redis.Nil) {
		r.log.Info("backend: task gone before it was taken", "task", j.task)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backendrole: take task %s: %w", j.task, err)
	}
	return pairs(res), nil
}

// pairs turns HGETALL's flat reply into a map.
func pairs(flat []any) map[string]string {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		m[k] = v
	}
	return m
}

// loadFiles reads task:ID:files and deletes it, in one pipeline.
func (r *Role) loadFiles(ctx context.Context, taskID string) (map[string]string, error) {
	var files *redis.MapStringStringCmd
	_, err := r.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		files = p.HGetAll(ctx, r.cfg.Keys.TaskFiles(taskID))
		p.Del(ctx, r.cfg.Keys.TaskFiles(taskID))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("backendrole: load files of task %s: %w", taskID, err)
	}
	return files.Val(), nil
}

// releaseScript frees a task's slot: it pushes the ID to queue.finished
// only if it takes it out of queue.processing, so that a retry, or a
// scheduler that already freed the slot of a task whose task:ID is gone,
// never frees it twice. KEYS: queue.processing, queue.finished. ARGV: ID.
var releaseScript = redis.NewScript(`
if redis.call('SREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  return 1
end
return 0`)

// release runs releaseScript, retried with backoff while Redis fails,
// until ctx ends or the task's keys would have expired anyway: a slot
// whose release is lost stays taken in the scheduler until the queue server
// deletes task:ID (docs/redis.md, "Faults").
func (r *Role) release(ctx context.Context, taskID string) error {
	k := r.cfg.Keys
	deadline := time.Now().Add(redisq.TaskTTL)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, maxBackoff) {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := releaseScript.Run(actx, r.cfg.Redis, []string{k.Processing(), k.Finished()}, taskID).Err()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("backendrole: release task %s: %w", taskID, err)
		}
		r.log.Warn("backend: releasing a task failed", "task", taskID, "err", err, "retry_in", wait)
		select { // backoff between retries against a failing Redis
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/redisq"
)

// maxDashboardQueue bounds the queued tasks the dashboard lists; the
// queue's length is in its "queues" entry.
const maxDashboardQueue = 1000

// dashboardScript writes scheduler.dashboard while the token leads: KEYS
// leader, dashboard; ARGV token, document, ttl ms. The fence makes a
// deposed leader's write fail instead of replacing its successor's.
var dashboardScript = redis.NewScript(fence + `
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1`)

// publishDashboard writes the deployment's dashboard to Redis. Only a
// refusal by the fence is an error (the leader steps down); a failed read
// or write is logged once per streak and tried again at the next tick,
// since the dashboard changes nothing the core decides.
func (l *leader) publishDashboard(ctx context.Context) error {
	err := l.writeDashboard(ctx)
	switch {
	case err == nil:
		if l.dashFailing {
			l.s.log.Info("publishing the dashboard works again")
		}
		l.dashFailing = false
		return nil
	case errors.Is(err, errFenced) || ctx.Err() != nil:
		return err
	}
	if !l.dashFailing {
		l.s.log.Warn("cannot publish the dashboard; retrying", "err", err)
	}
	l.dashFailing = true
	return nil
}

func (l *leader) writeDashboard(ctx context.Context) error {
	d, err := l.dashboard(ctx)
	if err != nil {
		return err
	}
	b, err := d.Encode()
	if err != nil {
		return err
	}
	k := l.s.keys
	if _, err = runScript(ctx, l.s.rdb, dashboardScript, "publish the dashboard", []string{k.Leader(), k.Dashboard()},
		l.token, b, l.s.cfg.DashboardTTL.Milliseconds()); err != nil {
		return err
	}
	return l.recordHistory(ctx, d.State)
}

// dashboard builds the deployment's dashboard from the core and what the
// leader tracks, with the backends from Redis.
func (l *leader) dashboard(ctx context.Context) (dashboard.Dashboard, error) {
	live, backendOf, err := l.readBackends(ctx)
	if err != nil {
		return dashboard.Dashboard{}, err
	}
	p := asyqueue.DashboardParts{Now: l.s.cfg.Now(), Core: l.core.Snapshot(), Live: live,
		Events: &l.s.recent, Ended: &l.s.ended, Class: l.classOfTask}
	if l.queued > 0 {
		p.Queue, _ = l.core.Estimates(asyqueue.QueueName, min(l.queued, maxDashboardQueue)) // the queue always exists
	}
	for id, t := range l.tasks {
		if !t.running {
			continue
		}
		r := dashboard.RunningTask{ID: id, Class: t.class, Backend: backendOf[id], StartedAt: t.startedAt, Interactive: t.interactive}
		if !t.interactive {
			r.Tier = l.s.cfg.Tiers[t.tier].Name
		}
		p.Running = append(p.Running, r)
	}
	d := dashboard.Dashboard{State: asyqueue.BuildDashboard(p),
		Leader: &dashboard.Leader{Node: l.s.cfg.Node, Token: l.token}}
	if l.s.cfg.JobsStats != nil {
		if st, ok := l.s.cfg.JobsStats(); ok {
			d.Jobs = st
		}
	}
	return d, nil
}

// classOfTask is a queued task's class ("" for one the leader does not hold).
func (l *leader) classOfTask(id string) string {
	if t := l.tasks[id]; t != nil {
		return t.class
	}
	return ""
}

// readBackends reads the live backend IDs and, for each running task, the
// backend that took it ("" until one did, or when its hash is garbage), in
// one pipeline.
func (l *leader) readBackends(ctx context.Context) ([]string, map[string]string, error) {
	k := l.s.keys
	pipe := l.s.rdb.Pipeline()
	members := pipe.SMembers(ctx, k.BackendSet())
	took := map[string]*redis.StringCmd{}
	for id, t := range l.tasks {
		if t.running {
			took[id] = pipe.HGet(ctx, k.Task(id), redisq.FieldBackend)
		}
	}
	_, _ = pipe.Exec(ctx) // each command's error is its own
	if err := members.Err(); err != nil {
		return nil, nil, fmt.Errorf("dashboard: read backend.set: %w", err)
	}
	backendOf := make(map[string]string, len(took))
	for id, c := range took {
		backendOf[id] = c.Val() // "" when absent, or when task:ID is not a hash
	}
	return members.Val(), backendOf, nil
}

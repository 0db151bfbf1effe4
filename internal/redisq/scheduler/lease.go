package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/redisq"
)

// errLostLease: the lease lapsed or another holds it.
var errLostLease = errors.New("lost the lease")

// renewal is the outcome of one renewal: whether Redis still held the
// lease as ours, when the renewal was sent, and the keeper's connection
// (nil once it failed).
type renewal struct {
	held   bool
	sentAt time.Time
	err    error
	conn   *redis.Conn
}

// keepLease renews the lease of token every RenewEvery until ctx ends or
// the lease is lost, and returns why it was lost (errLostLease). acquired
// is when the script that took the lease was sent.
//
// It runs on a goroutine of its own, not between the leader's steps, and
// on a connection of its own (leaseConn): a busy Redis (a long script, a
// slow fsync) then holds a renewal up once, not once per step of the
// leader and per round trip of dialing a connection when the shared pool
// has none free. One renewal is in flight at a time. The lease is lost at
// once when Redis answers that it no longer holds our token; otherwise it
// lasts, by this node's clock, LeaseTTL from when the last renewal that
// succeeded was sent (Redis started the TTL no earlier), and until then a
// renewal that fails is tried again at the next tick and one that hangs is
// waited for. The clock is the monotonic one, not Config.Now: Redis counts
// the TTL in real time.
func (s *Scheduler) keepLease(ctx context.Context, token string, acquired time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends a renewal still in flight
	lapse := time.NewTimer(time.Until(acquired.Add(s.cfg.LeaseTTL)))
	defer lapse.Stop()
	tick := time.NewTicker(s.cfg.RenewEvery)
	defer tick.Stop()
	results := make(chan renewal, 1)
	conn, err := s.leaseConn(ctx)
	if err != nil {
		s.log.Warn("no connection of its own for the lease yet; retrying", "err", err)
	}
	inFlight, failing := false, false
	defer func() { closeLeaseConn(conn, inFlight, results) }()
	lastAt := acquired
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-lapse.C:
			return fmt.Errorf("%w: it lapsed, no renewal succeeded in %v (the last one was sent at %s)",
				errLostLease, s.cfg.LeaseTTL, lastAt.Format(time.RFC3339Nano))
		case <-tick.C:
			if !inFlight {
				inFlight = true
				go func(c *redis.Conn) { results <- s.renewOn(ctx, c, token) }(conn)
				conn = nil
			}
		case r := <-results:
			inFlight, conn = false, r.conn
			switch {
			case r.err != nil:
				if !failing && ctx.Err() == nil {
					s.log.Warn("cannot renew the lease; retrying while it lasts", "err", r.err)
				}
				failing = true
			case !r.held:
				return fmt.Errorf("%w: another scheduler holds it", errLostLease)
			default:
				if failing {
					s.log.Info("renewed the lease again")
				}
				failing, lastAt = false, r.sentAt
				lapse.Reset(time.Until(r.sentAt.Add(s.cfg.LeaseTTL)))
			}
		}
	}
}

// closeLeaseConn closes the keeper's connection when the keeper returns:
// the one it holds, or the one a renewal still in flight will hand back.
func closeLeaseConn(conn *redis.Conn, inFlight bool, results <-chan renewal) {
	if !inFlight {
		if conn != nil {
			_ = conn.Close()
		}
		return
	}
	go func() {
		if r := <-results; r.conn != nil {
			_ = r.conn.Close()
		}
	}()
}

// renewOn renews the lease once on conn, the keeper's connection, first
// opening one when conn is nil (redisq.RunOwn); a connection that failed
// is closed, and the next renewal opens another.
func (s *Scheduler) renewOn(ctx context.Context, conn *redis.Conn, token string) renewal {
	at := time.Now()
	ok, err := redisq.RunOwn(ctx, s.rdb, &conn, renewScript, []string{s.keys.Leader()}, token, s.cfg.LeaseTTL.Milliseconds()).Int()
	if err != nil {
		return renewal{sentAt: at, err: fmt.Errorf("renew the lease: %w", err)}
	}
	return renewal{held: ok == 1, sentAt: at, conn: conn}
}

// leaseConn opens the keeper's connection (redisq.OwnConn) to the server
// that holds the lease key, with the renewal script loaded; nil, nil for a
// client of a kind without one (renewals then use the pool).
func (s *Scheduler) leaseConn(ctx context.Context) (*redis.Conn, error) {
	conn, err := redisq.OwnConn(ctx, s.rdb, s.keys.Leader(), renewScript)
	if err != nil {
		return nil, fmt.Errorf("the lease's connection: %w", err)
	}
	return conn, nil
}

// Package redisjobs keeps the generic jobs of internal/jobs on Redis, for
// multi-node mode: the leading scheduler runs the jobs engine over this
// store, and a standby that takes the lead rebuilds the engine from it.
// docs/redis.md ("Generic jobs") lists every key.
//
// One goroutine writes. Changes appended while a write is in flight wait
// in the next batch (group commit), and each batch is one Lua script that
// first checks the fence — that scheduler.leader still holds this
// store's token — and then applies every change of the batch, so that a
// scheduler that lost the lead cannot write anything.
package redisjobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/redisq"
)

// ErrFenced reports that the store's token no longer holds the leader
// key: another scheduler leads, and this store writes nothing more.
var ErrFenced = errors.New("redisjobs: fenced, another scheduler holds the lead")

// Fence is the lease every write checks: Key must hold Token. A zero
// Fence (empty Token) checks nothing, for tests and single-leader use.
type Fence struct {
	Key   string // the leader key; empty: keys.Leader()
	Token string
}

// maxScriptOps bounds the changes one script carries, so that a huge
// batch neither blocks Redis for long nor exceeds its argument limits;
// a larger batch is written as several scripts, in order.
const maxScriptOps = 10000

// Store is the Redis jobs.Store.
type Store struct {
	*jobs.GroupCommitter // Append, Close and Prune
	rdb                  redis.UniversalClient
	k                    names
	fence                Fence
	log                  *slog.Logger
}

// New returns a store on rdb, its keys under prefix (the deployment's,
// redisq.DefaultPrefix unless configured), whose writes check fence,
// and starts its writer. log may be nil. Close does not close rdb, which
// the caller owns; once fenced, every write fails with ErrFenced.
func New(rdb redis.UniversalClient, prefix string, fence Fence, log *slog.Logger) *Store {
	if fence.Key == "" {
		fence.Key = redisq.NewKeys(prefix).Leader() // the leading scheduler's lease
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Store{rdb: rdb, k: newNames(prefix), fence: fence, log: log}
	fenced := func(err error) bool { return errors.Is(err, ErrFenced) }
	commit := func(ops []jobs.Op) error { return s.commit(context.Background(), ops) }
	s.GroupCommitter = jobs.NewGroupCommitter("redisjobs", commit, fenced, nil, log)
	return s
}

// commit writes ops in order: runs of changes in scripts of at most
// maxScriptOps changes, each prune on its own.
func (s *Store) commit(ctx context.Context, ops []jobs.Op) error {
	for len(ops) > 0 {
		switch ops[0].Kind {
		case jobs.OpPrune:
			if err := s.prune(ctx, ops[0].At); err != nil {
				return err
			}
			ops = ops[1:]
			continue
		case jobs.OpDelete:
			// A delete is a prune of one finished job, whatever its time.
			if err := s.pruneJobs(ctx, math.MaxInt64, []string{strconv.FormatInt(ops[0].ID, 10)}); err != nil {
				return err
			}
			ops = ops[1:]
			continue
		}
		n := 0
		for n < len(ops) && n < maxScriptOps && ops[n].Kind != jobs.OpPrune && ops[n].Kind != jobs.OpDelete {
			n++
		}
		if err := s.apply(ctx, ops[:n]); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// fenceError turns a script's refusal into ErrFenced.
func fenceError(err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) && len(re.Error()) >= 6 && re.Error()[:6] == "FENCED" {
		return fmt.Errorf("%w: %s", ErrFenced, re.Error())
	}
	return err
}

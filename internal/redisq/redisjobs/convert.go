package redisjobs

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// convertScript turns the indexes of the layout before jobs.unfinished
// into this one: jobs.state:queued and jobs.state:running together become
// jobs.unfinished, jobs.state:queued and jobs.ids (every job) go. The job
// hashes and the other indexes, jobs.state:running among them, are the
// same in both.
//
// KEYS: 1 leader, 2 unfinished, 3 state:queued, 4 state:running, 5 ids.
// ARGV: 1 token.
var convertScript = redis.NewScript(fenceLua + `
redis.call('ZUNIONSTORE', KEYS[2], 3, KEYS[2], KEYS[3], KEYS[4], 'AGGREGATE', 'MAX')
redis.call('DEL', KEYS[3], KEYS[5])
return 1
`)

// convert rewrites an older layout's indexes, once: Load calls it before
// reading, and it writes (fenced) only when the old keys are there.
func (s *Store) convert(ctx context.Context) error {
	n, err := s.rdb.Exists(ctx, s.k.oldQueued, s.k.oldIDs).Result()
	if err != nil {
		return fmt.Errorf("redisjobs: load: looking for an older layout: %w", err)
	}
	if n == 0 {
		return nil
	}
	keys := []string{s.fence.Key, s.k.unfinished, s.k.oldQueued, s.k.states[stRunning], s.k.oldIDs}
	if err := fenceError(convertScript.Run(ctx, s.rdb, keys, s.fence.Token).Err()); err != nil {
		return fmt.Errorf("redisjobs: load: converting an older layout: %w", err)
	}
	s.log.Info("redisjobs: converted the indexes of an older layout", "unfinished", s.k.unfinished)
	return nil
}

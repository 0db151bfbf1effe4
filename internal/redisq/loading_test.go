package redisq

import (
	"errors"
	"fmt"
	"testing"
)

// fakeRedisError stands in for a Redis error reply (go-redis's own type is
// internal): a Redis that loads its data set answers LOADING only for the
// seconds after a restart, which a test cannot produce on demand.
type fakeRedisError string

func (e fakeRedisError) Error() string { return string(e) }
func (fakeRedisError) RedisError()     {}

// A LOADING reply, wrapped or not, is Redis reading its data set back;
// other errors and replies are not.
func TestLoading(t *testing.T) {
	loading := fakeRedisError("LOADING Redis is loading the dataset in memory")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{loading, true},
		{fmt.Errorf("read pending entries: %w", loading), true},
		{fakeRedisError("ERR unknown command"), false},
		{errors.New("LOADING but not from Redis"), false},
		{nil, false},
	} {
		if got := Loading(tc.err); got != tc.want {
			t.Errorf("Loading(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

package redisq

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Open connects to Redis as rawURL says and checks the connection:
//
//	redis://[user:password@]host:port[/db]              one server
//	redis://host:port?addr=host2:port2&cluster=true     Redis Cluster (seed nodes)
//	redis://host:port?addr=host2:port2&master=NAME      Sentinel (sentinel addresses)
//
// poolSize bounds the connections (0: go-redis's default); a role that
// blocks one connection per waiting task needs a large pool.
func Open(ctx context.Context, rawURL string, poolSize int) (redis.UniversalClient, error) {
	c, err := newClient(rawURL, poolSize)
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", redactURL(rawURL), err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis %s: %w", redactURL(rawURL), err)
	}
	return c, nil
}

func newClient(rawURL string, poolSize int) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	switch {
	case q.Get("master") != "":
		return newFailover(u, poolSize)
	case q.Get("cluster") == "true" || len(q["addr"]) > 0:
		q.Del("cluster")
		u.RawQuery = q.Encode()
		opt, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, err
		}
		opt.PoolSize = poolSize
		return redis.NewClusterClient(opt), nil
	default:
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, err
		}
		opt.PoolSize = poolSize
		return redis.NewClient(opt), nil
	}
}

func newFailover(u *url.URL, poolSize int) (redis.UniversalClient, error) {
	q := u.Query()
	opt := &redis.FailoverOptions{MasterName: q.Get("master"), SentinelAddrs: append([]string{u.Host}, q["addr"]...), PoolSize: poolSize}
	if u.User != nil {
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
	}
	return redis.NewFailoverClient(opt), nil
}

// redactURL hides a password for error messages and logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return strings.ReplaceAll(u.Redacted(), "%2A", "*")
}

// OwnConn opens a connection of its own, outside rdb's shared pool, to the
// server that holds key (the master of its slot on a Cluster; the master
// through Sentinel), and loads scripts on it. A periodic write that must
// not miss its deadline while Redis is busy (a lease, an address with an
// expiry) uses it: it then never waits for a free connection of the pool,
// nor dials one — several round trips, each behind a stall — and a script
// runs in one round trip. It returns nil, nil for a client of another
// kind, which the caller then uses as it is. Close the connection after
// an error (it is broken) and open another.
func OwnConn(ctx context.Context, rdb redis.UniversalClient, key string, scripts ...*redis.Script) (*redis.Conn, error) {
	var c *redis.Client
	switch r := rdb.(type) {
	case *redis.Client: // one server, or the master through Sentinel
		c = r
	case *redis.ClusterClient:
		var err error
		if c, err = r.MasterForKey(ctx, key); err != nil {
			return nil, fmt.Errorf("a connection of its own for %s: %w", key, err)
		}
	default:
		return nil, nil
	}
	conn := c.Conn()
	for _, sc := range scripts {
		if err := sc.Load(ctx, conn).Err(); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("a connection of its own for %s: %w", key, err)
		}
	}
	if len(scripts) == 0 {
		if err := conn.Ping(ctx).Err(); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("a connection of its own for %s: %w", key, err)
		}
	}
	return conn, nil
}

// RunOwn runs script on *conn, a connection of its own (OwnConn) to the
// server holding keys[0], opening it first when *conn is nil; a client of
// a kind without one runs it on rdb. After an error it closes *conn and
// sets it to nil, so that the next call opens another. The keeper of a
// periodic write keeps *conn between calls.
func RunOwn(ctx context.Context, rdb redis.UniversalClient, conn **redis.Conn, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if *conn == nil {
		c, err := OwnConn(ctx, rdb, keys[0], script)
		if err != nil {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
		*conn = c
	}
	var sc redis.Scripter = rdb
	if *conn != nil {
		sc = *conn
	}
	cmd := script.Run(ctx, sc, keys, args...)
	if cmd.Err() != nil && *conn != nil {
		_ = (*conn).Close()
		*conn = nil
	}
	return cmd
}

// Loading reports whether err is Redis answering that it is still loading
// its data set after a restart: a passing state, which callers wait out
// and retry, so it is logged as a warning.
func Loading(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "LOADING ")
}

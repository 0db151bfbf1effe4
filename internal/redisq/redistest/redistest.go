// Package redistest starts real redis-server processes for tests: one
// server, or a Redis Cluster of masters, on free loopback ports with their
// files in a temporary directory, stopped when the test ends.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/testwait"
)

// Server is a running redis-server.
type Server struct {
	Addr string // host:port
	cmd  *exec.Cmd
	args []string // what it was started with, for Restart
}

// URL is the server's redis:// address.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Kill stops the server at once (SIGKILL).
func (s *Server) Kill() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() }

// Start runs a redis-server on a free loopback port until the test ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	var lastErr error
	for range 5 { // a free port may be taken between choosing and binding it
		s, err := start(t, args)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("redistest: %v", lastErr)
	return nil
}

func start(t testing.TB, args []string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	base := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log")}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), args: append(base, args...)}
	if err := s.run(); err != nil {
		return nil, err
	}
	t.Cleanup(s.Kill)
	return s, nil
}

// run starts the server process and waits until it answers.
func (s *Server) run() error {
	s.cmd = exec.Command("redis-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server (is it installed? make deps installs it): %w", err)
	}
	if err := waitReady(s.Addr, s.cmd); err != nil {
		s.Kill()
		return err
	}
	return nil
}

// Restart kills the server (SIGKILL) and starts it again on the same
// port, directory and settings: what it kept on disk (its append-only
// file, when started with --appendonly yes) is what it has after.
func (s *Server) Restart() error {
	s.Kill()
	return s.run()
}

// waitReady pings the server until it answers, or fails when it exits.
func waitReady(addr string, cmd *exec.Cmd) error {
	exited := make(chan error, 1)
	go func() { _, err := cmd.Process.Wait(); exited <- err }()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server on %s exited: %v", addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("redis-server on %s did not answer within 10 s", addr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Cluster is a running Redis Cluster of masters without replicas.
type Cluster struct {
	Servers []*Server
}

// URL is the cluster's address for redisq.Open.
func (c *Cluster) URL() string {
	u := "redis://" + c.Servers[0].Addr + "?cluster=true"
	for _, s := range c.Servers[1:] {
		u += "&addr=" + s.Addr
	}
	return u
}

// StartCluster runs n cluster-enabled servers and joins them with
// redis-cli --cluster create, waiting until the cluster state is ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{}
	addrs := make([]string, n)
	for i := range n {
		s := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+strconv.Itoa(i)+".conf",
			"--cluster-node-timeout", "2000")
		c.Servers = append(c.Servers, s)
		addrs[i] = s.Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, s := range c.Servers {
		if err := waitClusterOK(s.Addr); err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	return c
}

func waitClusterOK(addr string) error {
	return waitFor(addr, 20*time.Second, "cluster state ok", func(c *redis.Client) bool {
		info, err := c.ClusterInfo(context.Background()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
}

// StartReplica runs a redis-server that replicates master, waiting until
// the link is up.
func StartReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	host, port, _ := net.SplitHostPort(master.Addr)
	s := Start(t, "--replicaof", host, port)
	if err := waitFor(s.Addr, 20*time.Second, "replication link up", func(c *redis.Client) bool {
		info, err := c.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return s
}

// Sentinel is a running Redis Sentinel that watches one master.
type Sentinel struct {
	*Server
	Master string // the name it watches the master under
}

// URL is the address for redisq.Open: the master through this Sentinel.
func (s *Sentinel) URL() string { return "redis://" + s.Addr + "?master=" + s.Master }

// StartSentinel runs a Sentinel that watches master under name, alone (a
// quorum of one) and quick to act: it counts a master down after 1 s of
// silence. It waits until the Sentinel has found master's replicas, if
// it has any, so that a failover can promote one.
func StartSentinel(t testing.TB, master *Server, name string, replicas int) *Sentinel {
	t.Helper()
	var lastErr error
	for range 5 { // a free port may be taken between choosing and binding it
		s, err := startSentinel(t, master, name)
		if err == nil {
			err = waitFor(s.Addr, 30*time.Second, fmt.Sprintf("sentinel sees %d replicas", replicas), func(c *redis.Client) bool {
				got, err := c.Do(context.Background(), "SENTINEL", "REPLICAS", name).Slice()
				return err == nil && len(got) >= replicas
			})
			if err != nil {
				t.Fatalf("redistest: %v", err)
			}
			return &Sentinel{Server: s, Master: name}
		}
		lastErr = err
	}
	t.Fatalf("redistest: %v", lastErr)
	return nil
}

func startSentinel(t testing.TB, master *Server, name string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	host, mport, _ := net.SplitHostPort(master.Addr)
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
		"sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n",
		port, dir, filepath.Join(dir, "sentinel.log"), name, host, mport, name, name)
	path := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites its configuration file
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", path, "--sentinel")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server --sentinel: %w", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	if err := waitReady(s.Addr, cmd); err != nil {
		s.Kill()
		return nil, err
	}
	t.Cleanup(s.Kill)
	return s, nil
}

// MasterAddr asks the Sentinel which address the master has now.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	got, err := c.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Master).StringSlice()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: master %s: %w", s.Addr, s.Master, err)
	}
	if len(got) != 2 {
		return "", fmt.Errorf("sentinel %s: master %s: answer %q", s.Addr, s.Master, got)
	}
	return net.JoinHostPort(got[0], got[1]), nil
}

// waitFor polls the server at addr until cond holds, for at most bound.
func waitFor(addr string, bound time.Duration, what string, cond func(*redis.Client) bool) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	return testwait.Until(bound, func() bool { return cond(c) }, "%s: %s", addr, what)
}

// WatchMax reads the integer at key over and over until the returned stop
// is called, and stop returns the largest value seen: a bound that must
// hold at every moment, not only at the end, under concurrent writers.
func WatchMax(ctx context.Context, rdb redis.UniversalClient, key string) (stop func() int64) {
	done, most := make(chan struct{}), make(chan int64)
	go func() {
		var m int64
		for {
			select {
			case <-done:
				most <- m
				return
			default:
			}
			n, _ := rdb.Get(ctx, key).Int64()
			m = max(m, n)
		}
	}()
	return func() int64 { close(done); return <-most }
}

// DebugArgs are the arguments Start needs for Stall: DEBUG allowed from
// loopback connections.
var DebugArgs = []string{"--enable-debug-command", "local"}

// Stall makes the server busy for total, in stalls of stall each, back to
// back (DEBUG SLEEP from a connection of its own): each stall holds every
// client's command until it ends, as a long script or a slow fsync does,
// and between stalls the server answers what waited. The server must run
// with DebugArgs.
func (s *Server) Stall(ctx context.Context, stall, total time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: -1, MaxRetries: -1})
	defer c.Close()
	for end := time.Now().Add(total); ; {
		secs := strconv.FormatFloat(stall.Seconds(), 'f', 3, 64)
		if err := c.Do(ctx, "DEBUG", "SLEEP", secs).Err(); err != nil {
			return fmt.Errorf("redis-server on %s: DEBUG SLEEP %s: %w", s.Addr, secs, err)
		}
		if !time.Now().Before(end) {
			return nil
		}
	}
}

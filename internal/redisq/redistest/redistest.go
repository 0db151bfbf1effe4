// Package redistest starts real redis-server processes for tests: one
// server, or a Redis Cluster of masters, on free loopback ports with their
// files in a temporary directory, stopped when the test ends.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a running redis-server.
type Server struct {
	Addr string // host:port
	cmd  *exec.Cmd
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
	cmd := exec.Command("redis-server", append(base, args...)...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server (is it installed? make deps installs it): %w", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	if err := waitReady(s.Addr, cmd); err != nil {
		s.Kill()
		return nil, err
	}
	t.Cleanup(s.Kill)
	return s, nil
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
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		info, err := c.ClusterInfo(context.Background()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, with a deadline
	}
	return fmt.Errorf("cluster node %s not ok within 20 s", addr)
}

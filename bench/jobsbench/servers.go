package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// child is a server the bench started; it dies with the bench (the parent
// death signal), and stop ends it with a signal, then a kill.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// startChild starts a server in the foreground of its own process group,
// its output in logPath. cred, if not nil, runs it as another user.
func startChild(name, logPath, dir string, cred *syscall.Credential, deathSig syscall.Signal, bin string, args ...string) (*child, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig, Credential: cred}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	return c, nil
}

// stop sends sig and waits up to 20 s, then kills.
func (c *child) stop(sig syscall.Signal) {
	if c == nil {
		return
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		fmt.Fprintf(os.Stderr, "jobsbench: %s did not stop in 20 s; killing it\n", c.name)
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// failed adds the tail of the child's log to err.
func (c *child) failed(err error) error {
	b, _ := os.ReadFile(c.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Errorf("%s: %w; its log ends:\n%s", c.name, err, b)
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitUp calls up until it succeeds, the child exits, or 60 s pass.
func waitUp(ctx context.Context, c *child, up func(context.Context) error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := up(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return c.failed(errors.New("exited at start-up"))
		default:
		}
		if time.Now().After(deadline) {
			return c.failed(fmt.Errorf("not up after 60 s: %w", err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flushTimeout is how long a FLUSHALL may take: a million jobs take
// seconds to free, past go-redis's default read timeout of 3 s.
const flushTimeout = 2 * time.Minute

// redisServer is a redis-server on a loopback port in a temp dir.
type redisServer struct {
	addr    string
	version string
	child   *child
}

// startRedis starts redis-server on 127.0.0.1 with an append-only file
// fsynced as appendfsync says and no RDB snapshots.
func startRedis(ctx context.Context, dir, appendfsync string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (run scripts/deps.sh): %w", err)
	}
	v, _ := exec.Command(bin, "--version").Output()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c, err := startChild("redis-server", filepath.Join(dir, "redis.log"), dir, nil, syscall.SIGTERM, bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--protected-mode", "yes",
		"--dir", dir, "--daemonize", "no", "--save", "",
		"--appendonly", "yes", "--appendfsync", appendfsync)
	if err != nil {
		return nil, err
	}
	r := &redisServer{addr: fmt.Sprintf("127.0.0.1:%d", port), child: c, version: redisVersion(string(v))}
	rc := redis.NewClient(&redis.Options{Addr: r.addr})
	defer rc.Close()
	if err := waitUp(ctx, c, func(ctx context.Context) error { return rc.Ping(ctx).Err() }); err != nil {
		c.stop(syscall.SIGKILL)
		return nil, err
	}
	return r, nil
}

// redisVersion takes "v=7.0.15" out of redis-server --version.
func redisVersion(s string) string {
	for f := range strings.FieldsSeq(s) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(s)
}

func (r *redisServer) stop() {
	if r != nil {
		r.child.stop(syscall.SIGTERM)
	}
}

// pgServer is a throwaway PostgreSQL cluster: initdb in a temp dir, the
// postmaster on a loopback port, no unix socket, trust authentication.
type pgServer struct {
	url     string
	version string
	child   *child
}

// startPostgres creates a cluster in dir and starts it with the given
// settings (name=value, passed as -c). As root, initdb and postgres run as
// the user nobody, which owns dir: both refuse to run as root.
func startPostgres(ctx context.Context, dir, binDir string, settings []string) (*pgServer, error) {
	if binDir == "" {
		var err error
		if binDir, err = postgresBinDir(); err != nil {
			return nil, err
		}
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("running as root and no user nobody to run postgres as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	v, _ := exec.Command(filepath.Join(binDir, "postgres"), "--version").Output()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	// SIGINT is PostgreSQL's fast shutdown.
	c, err := startChild("postgres", filepath.Join(dir, "postgres.log"), dir, cred, syscall.SIGINT,
		filepath.Join(binDir, "postgres"), args...)
	if err != nil {
		return nil, err
	}
	p := &pgServer{url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		child: c, version: strings.TrimSpace(strings.TrimPrefix(string(v), "postgres (PostgreSQL) "))}
	err = waitUp(ctx, c, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, p.url)
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
	if err != nil {
		c.stop(syscall.SIGKILL)
		return nil, err
	}
	return p, nil
}

// postgresBinDir is Debian's /usr/lib/postgresql/<newest>/bin.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", errors.New("no /usr/lib/postgresql/*/bin/initdb (run scripts/deps.sh, or give -pg-bin)")
	}
	slices.SortFunc(found, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	return found[len(found)-1], nil
}

func (p *pgServer) stop() {
	if p != nil {
		p.child.stop(syscall.SIGINT)
	}
}

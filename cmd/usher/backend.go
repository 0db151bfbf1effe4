package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/backendrole"
	"github.com/usherhq/usher/internal/sandbox"
)

// backendOptions are the flags of `usher backend`.
type backendOptions struct {
	listen   string
	origins  []string
	drain    time.Duration
	logLevel slog.Level
	sandbox  sandboxFlags
	upload   byteSize
	files    int

	// Multi-node mode on Redis (docs/redis.md); off without redis.
	redis        string
	redisPrefix  string
	advertise    string
	heartbeatTTL time.Duration
	// acceptTimeout is how long a queue server has to connect to a task in
	// Redis mode (0: backendrole.DefaultAcceptTimeout); tests lower it.
	acceptTimeout time.Duration

	// newStarter builds the runner; tests replace it.
	newStarter func(sandbox.Config) (backend.Starter, error)
	// onListen is told the address once the backend listens.
	onListen func(net.Addr)
}

func newBackendCommand() *cobra.Command {
	return backendCommand(&backendOptions{newStarter: sandboxStarter})
}

// backendCommand is the command that fills o.
func backendCommand(o *backendOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backend",
		Short: "Run one sandboxed Asymptote backend (the backend protocol at /)",
		Long: `backend serves the backend protocol ("Asymptote server") over WebSocket
at / on --listen: one connection and one asy task at a time, each task in its
own bubblewrap sandbox with the limits below (0 means the runner's documented
default). A second connection while one is open gets
complete {"success":false,"error":"backend busy"}. See docs/protocol.md.

It refuses to start when the sandbox does not work (bubblewrap missing or
unable to create its namespaces; the error names the setting that refuses
them, see docs/sandbox.md) unless --insecure is given, which runs asy
without a sandbox and logs a warning on every task.

GET /livez answers 200 while the process runs; GET /readyz answers 200 when
no connection holds the backend and 503 otherwise. On SIGINT or SIGTERM it
stops accepting connections, lets a running task finish for up to --drain,
then aborts it.

With --redis it is instead a backend of the multi-node mode (docs/redis.md):
it registers in Redis with a heartbeat, takes tasks from queue.outcoming,
runs each in the sandbox and serves its output to the queue server that
connects to ws://ADVERTISE/task/TOKEN (the address it publishes in
task:ID:backend). /readyz then also answers 503 while the heartbeat fails.
On SIGINT or SIGTERM it takes no new task, lets the running one finish for
up to --drain, aborts it after that, and deregisters.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:8081", "address to listen on")
	f.StringSliceVar(&o.origins, "origin", nil, "browser origins allowed to connect besides the backend's own host (host patterns)")
	f.DurationVar(&o.drain, "drain", 30*time.Second, "on shutdown, how long a running task may go on before it is aborted")
	f.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	o.sandbox.register(f)
	f.IntVar(&o.files, "max-files", 0, "most files in one task")
	f.Var(&o.upload, "max-upload", "most bytes of all files of one task together")
	f.StringVar(&o.redis, "redis", "", "run as a backend of the multi-node mode on this Redis (redis://host:port, see docs/redis.md)")
	f.StringVar(&o.redisPrefix, "redis-prefix", redisq.DefaultPrefix, "prefix of every Redis key (a hash tag, for Redis Cluster)")
	f.StringVar(&o.advertise, "advertise", "", "with --redis: host:port queue servers dial to reach this backend (default: the listen address)")
	f.DurationVar(&o.heartbeatTTL, "heartbeat-ttl", backendrole.DefaultHeartbeatTTL, "with --redis: life of the heartbeat key, renewed every third of it")
	envFallback(cmd, "USHER_BACKEND_")
	return cmd
}

// sandboxStarter is the production runner.
func sandboxStarter(cfg sandbox.Config) (backend.Starter, error) {
	r, err := sandbox.New(cfg)
	if err != nil {
		return nil, err
	}
	return backend.Sandbox(r), nil
}

// sandboxConfig maps the flags onto the runner's configuration.
func (o *backendOptions) sandboxConfig(log *slog.Logger) sandbox.Config {
	cfg := o.sandbox.config(log)
	cfg.Limits.Files, cfg.Limits.Upload = o.files, int64(o.upload)
	return cfg
}

// run serves until ctx ends, then shuts down gracefully.
func (o *backendOptions) run(ctx context.Context, logOut io.Writer) error {
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: o.logLevel}))
	starter, err := o.newStarter(o.sandboxConfig(log))
	if err != nil {
		return fmt.Errorf("backend: %w", err) // the runner's error names the sandbox and the step
	}
	if c, ok := starter.(io.Closer); ok {
		defer c.Close() // the runner's spare displays and shader cache template
	}
	if o.redis != "" {
		return o.runRedis(ctx, starter, log)
	}
	b, err := backend.New(backend.Config{
		Starter: starter, MaxFiles: o.files, MaxUpload: int64(o.upload),
		OriginPatterns: o.origins, Logger: log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	srv := &http.Server{Handler: backendMux(b), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("backend: listening", "addr", ln.Addr().String(), "insecure", o.sandbox.insecure)
	if o.onListen != nil {
		o.onListen(ln.Addr())
	}
	select {
	case err := <-served:
		return fmt.Errorf("backend: %w", err)
	case <-ctx.Done():
	}
	return o.shutdown(srv, b, log)
}

// shutdown stops listening, drains the running task for up to --drain, then
// aborts it.
func (o *backendOptions) shutdown(srv *http.Server, b *backend.Backend, log *slog.Logger) error {
	log.Info("backend: shutting down", "drain", o.drain)
	ctx, cancel := context.WithTimeout(context.Background(), o.drain)
	defer cancel()
	errSrv := srv.Shutdown(ctx)
	errB := b.Shutdown(ctx)
	if errors.Is(errB, context.DeadlineExceeded) {
		log.Warn("backend: a task was aborted at shutdown")
		errB = nil
	}
	if errSrv != nil && !errors.Is(errSrv, context.DeadlineExceeded) {
		return fmt.Errorf("backend: shutdown: %w", errSrv)
	}
	return errB
}

// backendMux mounts the protocol at / and the probes beside it.
func backendMux(b *backend.Backend) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/", b)
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if b.Busy() {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "idle")
	})
	return mux
}

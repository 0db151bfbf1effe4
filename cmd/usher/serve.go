package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/internal/service"
)

func newServeCommand() *cobra.Command {
	var (
		cfg     service.Config
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service: web app, /asy queue protocol, JSON API and local backends",
		Long: `serve runs the embedded default: one process with the HTTP server on :8080,
the scheduling core, a SQLite file for durable state and local sandboxed
Asymptote backends (one per CPU unless --backends says otherwise), plus any
remote backends given with --backend.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = newLogger(verbose)
			svc, err := service.New(cfg)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			return svc.Serve(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "listen", ":8080", "HTTP listen address")
	f.StringVar(&cfg.DataPath, "data", "usher.db", "SQLite file for durable state")
	f.IntVar(&cfg.LocalBackends, "backends", runtime.NumCPU(), "local sandboxed backends (tasks run at once in this process)")
	f.StringArrayVar(&cfg.RemoteBackends, "backend", nil, "URL of a remote `usher backend` (ws://host:port), repeatable")
	f.IntVar(&cfg.MediumLimit, "medium-limit", 0, "most medium-or-slow tasks running at once (0: half the backends, rounded up)")
	f.IntVar(&cfg.SlowLimit, "slow-limit", 0, "most slow tasks running at once (0: a quarter of the backends, rounded up)")
	f.IntVar(&cfg.Dispatcher.MaxQueued, "max-queued", 1000, "most tasks waiting in the queue")
	f.IntVar(&cfg.Dispatcher.MaxQueuedPerClient, "max-queued-per-client", 20, "most tasks one client address may have waiting")
	f.Int64Var(&cfg.CacheBytes, "cache-bytes", 256<<20, "result cache bound in bytes (0 turns the cache off)")
	f.Int64Var(&cfg.UploadBytes, "upload-store-bytes", 256<<20, "bound of the store of recent uploads that restore reads")
	f.IntVar(&cfg.Queue.MaxFiles, "max-files", 32, "most files in one task")
	f.Int64Var(&cfg.Queue.MaxUpload, "max-upload", 1<<20, "most bytes of all files of one task")
	f.DurationVar(&cfg.Queue.IdleBeforeRun, "idle-before-run", time.Minute, "a client must send run this soon after connecting")
	f.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", 30*time.Second, "how long running tasks may finish after a stop signal")
	f.BoolVar(&cfg.Sandbox.Insecure, "insecure", false, "run asy without the bubblewrap sandbox (logs a warning on every task)")
	f.BoolVar(&verbose, "verbose", false, "log debug messages")
	return cmd
}

// newLogger returns the text logger every subcommand uses, on stderr.
func newLogger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

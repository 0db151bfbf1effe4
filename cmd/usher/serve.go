package main

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/renderapi"
	"github.com/usherhq/usher/internal/service"
	"github.com/usherhq/usher/internal/webapp"
)

// serveOptions are the flags of `usher serve` that are not service.Config
// fields already.
type serveOptions struct {
	logLevel                          slog.Level
	sandbox                           sandboxFlags
	cacheBytes, uploadBytes, maxBytes byteSize
	shareBytes, shareQuota            byteSize
	renderSourceBytes                 byteSize
	jobTiers                          string
	jobsMaxBody                       byteSize
	access                            accessFlags
}

func newServeCommand() *cobra.Command {
	var (
		cfg service.Config
		o   = serveOptions{cacheBytes: 256 << 20, uploadBytes: 256 << 20, maxBytes: 1 << 20, shareBytes: 256 << 10, shareQuota: 1 << 30,
			renderSourceBytes: renderapi.DefaultSourceBytes,
			jobTiers:          "fast=1m,medium=10m@50%,slow=1h@25%", jobsMaxBody: 32 << 20}
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service: web app, /asy queue protocol and local backends",
		Long: `serve runs the embedded default: one process with the HTTP server on :8080,
the scheduling core with its duration tiers, a SQLite file for durable state
(the result cache) and local sandboxed Asymptote backends (one per CPU
unless --backends says otherwise), plus any remote backends given with
--backend. See docs/operations.md.

Generic jobs: /v1 (docs/api.md) with queues, key limits, workflows and
agents, kept in the same SQLite file; on first start an admin token is
written to usher-admin.token beside the data file.

Multi-node mode: with --redis, this process is one of many queue servers
in front of one Redis; tasks go to the elected 'usher scheduler' and run on
'usher backend --redis' processes (docs/redis.md). /v1 requests go to the
leading scheduler, which keeps the tokens in Redis: give --admin-token and
--admin-token-file to 'usher scheduler' then. Shares, the result cache and the
recent uploads then live in Redis, seen by every queue server.

Shares: --share-retention expires shares not opened for that long (410),
--share-quota refuses new shares beyond its bytes (507); 'usher share
delete' removes one (docs/operations.md, "Shares").

Endpoints: /asy (the queue protocol, docs/protocol.md), /api/render and
/embed.js (the render API, docs/api.md), /v1, /livez, /readyz; the
operator views /dashboard, /api/dashboard and /metrics (Prometheus) need
the admin token, or live on --admin-listen alone. Hosting for the public
(docs/operations.md): --allowed-origins, --trusted-proxies, --auth and
the rate limits. On SIGINT or SIGTERM it stops accepting
connections, lets running tasks finish for up to --shutdown-grace, then
aborts them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: o.logLevel}))
			cfg.Sandbox = o.sandbox.config(cfg.Logger)
			cfg.WebApp = webapp.Handler()
			cfg.CacheBytes, cfg.UploadBytes, cfg.Queue.MaxUpload = int64(o.cacheBytes), int64(o.uploadBytes), int64(o.maxBytes)
			cfg.ShareBytes, cfg.ShareQuota = int64(o.shareBytes), int64(o.shareQuota)
			cfg.Render.SourceBytes = int64(o.renderSourceBytes)
			tiers, err := jobs.ParseTiers(o.jobTiers)
			if err != nil {
				return fmt.Errorf("serve: --job-tiers: %w", err)
			}
			cfg.Jobs.Tiers, cfg.Jobs.MaxBody = tiers, int64(o.jobsMaxBody)
			tracer, stopTracing, err := startTracing(cmd.Context(), "usher")
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			defer stopTracing()
			cfg.Jobs.Tracer = tracer
			cfg.Sandbox.Limits.Files, cfg.Sandbox.Limits.Upload = cfg.Queue.MaxFiles, cfg.Queue.MaxUpload
			if cfg.Access, err = o.access.config(); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			if cfg.Redis.URL != "" && !cmd.Flags().Changed("backends") {
				cfg.LocalBackends = 0 // the backends register in Redis
			}
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
	f.StringArrayVar(&cfg.RemoteBackends, "backend", nil, "URL of a remote usher backend (ws://host:port), repeatable")
	f.IntVar(&cfg.MediumLimit, "medium-limit", 0, "most medium-or-slow tasks running at once (0: half the backends, rounded up)")
	f.IntVar(&cfg.SlowLimit, "slow-limit", 0, "most slow tasks running at once (0: a quarter of the backends, rounded up)")
	f.IntVar(&cfg.Caps.MaxQueued, "max-queued", asyqueue.DefaultMaxQueued, "most tasks waiting in the queue")
	f.IntVar(&cfg.Caps.MaxQueuedPerClient, "max-queued-per-client", asyqueue.DefaultMaxQueuedPerClient, "most tasks one client address may have waiting")
	f.Var(&o.cacheBytes, "cache-bytes", "result cache bound (0 turns the cache off)")
	f.Var(&o.uploadBytes, "upload-store-bytes", "bound of the store of recent uploads that restore reads")
	f.Var(&o.shareBytes, "share-bytes", "the most content one shared project holds")
	f.Var(&o.shareQuota, "share-quota", "the most bytes all shares hold together; new shares beyond it are refused (0: no bound)")
	f.DurationVar(&cfg.ShareRetention, "share-retention", 0, "a share not opened for this long expires, e.g. 8760h (0: shares are kept for good)")
	f.Var(&o.renderSourceBytes, "render-source-bytes", "bound of the sources kept for the render API's permanent URLs (SQLite)")
	f.DurationVar(&cfg.Render.SourceRetention, "render-source-retention", renderapi.DefaultSourceRetention, "how long Redis keeps a render API source after its last use (multi-node mode)")
	f.IntVar(&cfg.Queue.MaxFiles, "max-files", 32, "most files in one task")
	f.Var(&o.maxBytes, "max-upload", "most bytes of all files of one task")
	f.DurationVar(&cfg.Queue.IdleBeforeRun, "idle-before-run", time.Minute, "a client must send run this soon after connecting")
	f.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", 30*time.Second, "how long running tasks may finish after a stop signal")
	f.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	f.StringVar(&o.jobTiers, "job-tiers", o.jobTiers, "duration tiers of generic jobs, fastest first: name=duration[@limit|@share%],...")
	f.DurationVar(&cfg.Jobs.LeaseTTL, "agent-lease", 30*time.Second, "how long an agent's lease lasts after each call")
	f.StringVar(&cfg.Jobs.AdminToken, "admin-token", "", "make this string an admin token of /v1 (at least 16 characters)")
	f.StringVar(&cfg.Jobs.AdminTokenFile, "admin-token-file", "", "where a new admin token is written on first start (default: usher-admin.token beside --data)")
	f.Var(&o.jobsMaxBody, "max-body", "largest /v1 request body")
	f.DurationVar(&cfg.Jobs.Retention, "job-retention", 7*24*time.Hour, "how long finished jobs are kept (0: for good)")
	f.DurationVar(&cfg.Jobs.KeyRetention, "idempotency-key-retention", jobs.DefaultKeyRetention, "how long an idempotency key (a job's or a request's) is kept after its enqueue")
	f.StringVar(&cfg.Redis.URL, "redis", "", "run as a queue server of multi-node mode on this Redis (docs/redis.md): redis://host:port, ?cluster=true or ?master=NAME")
	f.StringVar(&cfg.Redis.Prefix, "redis-prefix", redisq.DefaultPrefix, "prefix of every Redis key (a {hash tag} keeps them in one Cluster slot)")
	f.StringVar(&cfg.Redis.Node, "node", redisq.DefaultNode(), "this process's name in multi-node mode")
	f.StringVar(&cfg.AdminAddr, "admin-listen", "", "serve the operator views (/dashboard, /api/dashboard, /metrics) on this address, without a token, and not on --listen")
	o.access.register(f)
	o.sandbox.register(f)
	envFallback(cmd, "USHER_SERVE_")
	return cmd
}

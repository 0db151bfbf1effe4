package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/backendrole"
)

// runRedis runs the backend role of the multi-node mode until ctx ends,
// then drains and deregisters.
func (o *backendOptions) runRedis(ctx context.Context, starter backend.Starter, log *slog.Logger) error {
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	defer ln.Close()
	advertise := o.advertise
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if err := backendrole.CheckAdvertise(advertise); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	rdb, err := redisq.Open(ctx, o.redis, 0)
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	defer rdb.Close()
	role, err := backendrole.Register(ctx, o.roleConfig(rdb, starter, advertise, log))
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	return o.serveRole(ctx, role, ln, log)
}

// roleConfig maps the flags onto the role's configuration.
func (o *backendOptions) roleConfig(rdb redis.UniversalClient, starter backend.Starter, advertise string, log *slog.Logger) backendrole.Config {
	return backendrole.Config{
		Redis: rdb, Keys: redisq.NewKeys(o.redisPrefix), Starter: starter, Advertise: advertise,
		HeartbeatTTL: o.heartbeatTTL, AcceptTimeout: o.acceptTimeout, Drain: o.drain,
		OriginPatterns: o.origins, Logger: log,
	}
}

// serveRole serves the role's HTTP side on ln while the role runs.
func (o *backendOptions) serveRole(ctx context.Context, role *backendrole.Role, ln net.Listener, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{Handler: role.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(ln)
		cancel() // the backend cannot be reached: stop taking tasks
	}()
	log.Info("backend: listening", "addr", ln.Addr().String(), "redis_backend", role.ID(),
		"insecure", o.sandbox.insecure)
	if o.onListen != nil {
		o.onListen(ln.Addr())
	}
	runErr := role.Run(ctx)
	log.Info("backend: shutting down")
	_ = srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("backend: %w", err)
	}
	return runErr
}

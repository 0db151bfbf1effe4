package service

import (
	"context"
	"log/slog"

	"github.com/usherhq/usher/internal/asyqueue"
)

// watchRemote keeps a remote backend in the pool while it answers.
// TODO(issue 4): lands with the backend protocol client.
func watchRemote(ctx context.Context, d *asyqueue.Dispatcher, url string, log *slog.Logger) {
	_ = ctx
	_ = d
	log.Warn("remote backends are not supported yet", "url", url)
}

package service

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/backend"
)

// watchRemote keeps a remote backend in the pool while it answers: it
// joins when its /livez answers, leaves when a task's connection
// breaks, and joins again when it answers again.
func watchRemote(ctx context.Context, d *asyqueue.Dispatcher, url string, log *slog.Logger) {
	lost := make(chan struct{}, 1)
	b := &backend.Remote{URL: url, Lost: func() {
		select {
		case lost <- struct{}{}:
		default:
		}
	}}
	for {
		d.MarkDown(url)
		if !waitHealthy(ctx, url) {
			return
		}
		if err := d.AddBackend(url, b); err != nil {
			log.Error("remote backend not added", "url", url, "err", err)
			return
		}
		log.Info("remote backend joined", "url", url)
		select {
		case <-ctx.Done():
			return
		case <-lost:
		}
		log.Warn("remote backend lost", "url", url)
		if err := d.RemoveBackend(url); err != nil {
			log.Error("remote backend not removed", "url", url, "err", err)
		}
	}
}

// waitHealthy polls the backend's /livez with backoff until it answers
// 200; false when ctx ends first.
func waitHealthy(ctx context.Context, url string) bool {
	health := strings.Replace(strings.TrimSuffix(url, "/"), "ws", "http", 1) + "/livez"
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return false
		}
	}
}

package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// leaderProxy passes /v1 to the leading scheduler of multi-node mode,
// whose address the leader keeps in Redis: any queue server takes
// submissions and leases, the leader decides.
type leaderProxy struct {
	rdb       redis.UniversalClient
	key       string // redisq.Keys.SchedulerAPI
	logger    *slog.Logger
	transport *http.Transport

	mu      sync.Mutex
	target  string
	proxy   *httputil.ReverseProxy
	checked time.Time
}

// leaderCacheFor is how long a leader's address is used before Redis is
// asked again; a failed request asks at once.
const leaderCacheFor = time.Second

func newLeaderProxy(rdb redis.UniversalClient, key string, logger *slog.Logger) *leaderProxy {
	// Every agent's calls go to the one leader: keep as many idle
	// connections to it as agents' calls may be in flight, rather than
	// net/http's default of 2 per host, which would dial and close a
	// connection for nearly every call under load.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	return &leaderProxy{rdb: rdb, key: key, logger: logger, transport: tr}
}

// ServeHTTP proxies the request, or answers 503 while no scheduler leads.
func (p *leaderProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proxy, err := p.current(r.Context())
	if err != nil {
		p.logger.Debug("v1: no leader to proxy to", "err", err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no scheduler leads at the moment; retry shortly"})
		return
	}
	proxy.ServeHTTP(w, r)
}

// current returns the proxy to the leader, asking Redis when the cached
// address is old or was found wrong.
func (p *leaderProxy) current(ctx context.Context) (*httputil.ReverseProxy, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proxy != nil && time.Since(p.checked) < leaderCacheFor {
		return p.proxy, nil
	}
	addr, err := p.rdb.Get(ctx, p.key).Result()
	if errors.Is(err, redis.Nil) {
		p.proxy = nil
		return nil, errors.New("no leader address in redis")
	}
	if err != nil {
		return nil, fmt.Errorf("reading the leader's address: %w", err)
	}
	p.checked = time.Now()
	if addr != p.target || p.proxy == nil {
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("leader address %q: not a URL", addr)
		}
		p.target, p.proxy = addr, p.newProxy(u)
	}
	return p.proxy, nil
}

func (p *leaderProxy) newProxy(u *url.URL) *httputil.ReverseProxy {
	rp := &httputil.ReverseProxy{
		Transport: p.transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.forget()
			p.logger.Info("v1: leader unreachable", "leader", u.String(), "err", err)
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the leading scheduler did not answer; retry shortly"})
		},
	}
	return rp
}

// forget drops the cached leader so that the next request asks Redis.
func (p *leaderProxy) forget() {
	p.mu.Lock()
	p.proxy, p.target = nil, ""
	p.mu.Unlock()
}

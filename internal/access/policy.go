package access

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usherhq/usher/internal/tokens"
)

// Config sets up a Policy; the zero value is an open server that trusts
// no proxy, allows only its own origin and limits nothing.
type Config struct {
	Proxies Proxies
	Origins Origins
	// Login requires an admin or client token on every compile path,
	// the share API and the web app (--auth).
	Login bool
	// Tokens is the token store that logins and the admin token are
	// checked against.
	Tokens *tokens.Store
	// ShareRate and RenderRate limit share creation and render requests
	// per client.
	ShareRate, RenderRate Rate
	// ConnectionsPerClient bounds a client's /asy connections at once.
	ConnectionsPerClient int
	Logger               *slog.Logger
	// Registerer, when set, receives usher_access_refused_total.
	Registerer prometheus.Registerer
	// now is the clock of the rate limits (time.Now when nil).
	now func() time.Time
}

// Policy decides who may use what; its methods wrap the service's routes.
type Policy struct {
	cfg     Config
	shares  *RateLimiter
	renders *RateLimiter
	conns   *ConnectionLimiter
	refused *prometheus.CounterVec
}

// Reasons of usher_access_refused_total.
const (
	refusedOrigin      = "origin"
	refusedLogin       = "login"
	refusedAdmin       = "admin"
	refusedRate        = "rate"
	refusedConnections = "connections"
)

// New builds the policy of cfg.
func New(cfg Config) *Policy {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	p := &Policy{cfg: cfg, shares: NewRateLimiter(cfg.ShareRate), renders: NewRateLimiter(cfg.RenderRate),
		conns: NewConnectionLimiter(cfg.ConnectionsPerClient),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "usher_access_refused_total",
			Help: "Requests refused before any work, by reason: origin, login, admin, rate, connections."}, []string{"reason"})}
	for _, r := range []string{refusedOrigin, refusedLogin, refusedAdmin, refusedRate, refusedConnections} {
		p.refused.WithLabelValues(r)
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(p.refused)
	}
	return p
}

// deny counts a refusal and answers it with JSON {error}.
func (p *Policy) deny(w http.ResponseWriter, reason string, status int, text string) {
	p.refused.WithLabelValues(reason).Inc()
	writeError(w, status, text)
}

// ClientAddress names the client of r everywhere a client is named:
// per-client caps, rate limits and logs.
func (p *Policy) ClientAddress(r *http.Request) string { return p.cfg.Proxies.ClientAddress(r) }

// WebSocket guards /asy before the upgrade: an origin that is not allowed
// gets 403, a missing login 401 (with --auth), a client holding its most
// connections 429; none of them costs a WebSocket or any task work.
func (p *Policy) WebSocket(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := p.cfg.Origins.Check(r); err != nil {
			p.deny(w, refusedOrigin, http.StatusForbidden, err.Error())
			return
		}
		client := p.ClientAddress(r)
		release, ok := p.conns.Acquire(client)
		if !ok {
			p.cfg.Logger.Debug("access: connection limit", "client", client, "most", p.cfg.ConnectionsPerClient)
			w.Header().Set("Retry-After", "5")
			p.deny(w, refusedConnections, http.StatusTooManyRequests, "too many connections from your address at once; close one and try again")
			return
		}
		defer release()
		h.ServeHTTP(w, r)
	})
}

// CORS lets the allowed origins use h from their pages: it answers
// preflights, names the caller's origin in Access-Control-Allow-Origin
// (or * when any origin is allowed) and refuses, with 403 before h runs,
// a request whose Origin (or, for an <img> load, Referer) is not allowed.
// Every answer varies by Origin.
func (p *Policy) CORS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		if err := p.cfg.Origins.Check(r); err != nil {
			p.deny(w, refusedOrigin, http.StatusForbidden, err.Error())
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			if p.cfg.Origins.Any() {
				w.Header().Set("Access-Control-Allow-Origin", "*")
			} else {
				w.Header().Set("Access-Control-Allow-Origin", origin)
			}
			w.Header().Set("Access-Control-Expose-Headers", "Content-Location, ETag, Retry-After")
		}
		if isPreflight(r) {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, If-None-Match")
			w.Header().Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// isPreflight says whether r is a CORS preflight.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// CheckEmbedder says whether the page that loads a figure (an <img> or a
// fetch) may embed it: nil when the browser names no origin or an
// allowed one.
func (p *Policy) CheckEmbedder(r *http.Request) error { return p.cfg.Origins.Check(r) }

// Shares guards the share API: CORS, and the share rate on POST.
func (p *Policy) Shares(h http.Handler) http.Handler {
	return p.CORS(p.limit(p.shares, "shares", http.MethodPost, h))
}

// Render guards the render API: CORS, and the render rate on every
// request that may compute (not a preflight).
func (p *Policy) Render(h http.Handler) http.Handler {
	return p.CORS(p.limit(p.renders, "renders", "", h))
}

// limit answers 429 with Retry-After when the client has used its rate;
// only requests of method count (all when method is "").
func (p *Policy) limit(l *RateLimiter, what, method string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if method == "" || r.Method == method {
			client := p.ClientAddress(r)
			if ok, wait := l.Allow(client, p.cfg.now()); !ok {
				p.cfg.Logger.Debug("access: rate limit", "what", what, "client", client)
				w.Header().Set("Retry-After", retryAfter(wait))
				p.deny(w, refusedRate, http.StatusTooManyRequests, "too many "+what+" from your address; try again in "+retryAfter(wait)+" s")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// RequireLogin lets through, with --auth, only requests that carry an
// admin or client token, except the paths in open (prefixes ending in
// "/", or exact paths) and CORS preflights. A browser navigating to a
// page is sent to the login page; others get 401 with JSON {error}.
// Without --auth it is h.
func (p *Policy) RequireLogin(open []string, h http.Handler) http.Handler {
	if !p.cfg.Login {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPreflight(r) || isOpen(r.URL.Path, open) {
			h.ServeHTTP(w, r)
			return
		}
		if _, err := user(r.Context(), p.cfg.Tokens, credential(r)); err != nil {
			p.refuse(w, r, err, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func isOpen(path string, open []string) bool {
	for _, o := range open {
		if path == o || (strings.HasSuffix(o, "/") && strings.HasPrefix(path, o)) {
			return true
		}
	}
	return false
}

// RequireAdmin lets through only requests that carry an admin token, in
// the Authorization header or the login cookie: the operator views. A
// browser without one is sent to the login page.
func (p *Policy) RequireAdmin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := user(r.Context(), p.cfg.Tokens, credential(r))
		switch {
		case err != nil:
			p.refuse(w, r, err, http.StatusUnauthorized)
		case t.Role != tokens.Admin:
			p.refuse(w, r, errors.New(textAdminNeeded), http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// refuse answers a request without the user it needs: the login page for
// a browser's page load, else JSON; 503 when the store cannot be read.
func (p *Policy) refuse(w http.ResponseWriter, r *http.Request, err error, status int) {
	known := errors.Is(err, errNoToken) || errors.Is(err, errBadToken) || errors.Is(err, errAgent) ||
		err.Error() == textAdminNeeded
	if !known {
		p.cfg.Logger.Error("access: token lookup failed", "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, textStoreDown)
		return
	}
	reason := refusedLogin
	if status == http.StatusForbidden {
		reason = refusedAdmin
	}
	p.refused.WithLabelValues(reason).Inc()
	if wantsPage(r) {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="usher"`)
	}
	writeError(w, status, err.Error())
}

func writeError(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": text})
}

package service

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/usherhq/usher/internal/access"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/internal/tokens"
	"github.com/usherhq/usher/internal/webapp"
	"github.com/usherhq/usher/internal/wire"
)

// dialWith opens /asy with extra request headers; on a refusal it returns
// the HTTP answer instead of failing.
func dialWith(t testing.TB, srv *httptest.Server, header http.Header) (*client, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/asy", &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return nil, resp
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &client{t: t, ctx: ctx, conn: wire.NewConn(ws, 1<<20, "queue", "missing", "result", "output", "complete", "denied")}, resp
}

// send makes one request with headers and returns the status and body.
func send(t testing.TB, srv *httptest.Server, method, path, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" { // the dashboard streams: its first event is enough
		event, _ := bufio.NewReader(resp.Body).ReadString('\n')
		return resp.StatusCode, resp.Header, event
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header, string(b)
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

func loginCookie(tok string) http.Header {
	return http.Header{"Cookie": {access.CookieName + "=" + tok}, "Accept": {"text/html"}}
}

// createToken makes a token of role in the service's token store.
func (ts *testService) createToken(t testing.TB, role tokens.Role) string {
	t.Helper()
	_, secret, err := ts.mode.tokens().Create(t.Context(), string(role), role)
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// compileOK runs a quick figure on c and checks that it succeeded.
func compileOK(t *testing.T, c *client) {
	t.Helper()
	c.compile(quickFigure, nil)
	if done := final(t, c.rest()); done.verb != "complete" || done.body["success"] != true {
		t.Fatalf("compile ended with %s %v", done.verb, done.body)
	}
}

// The operator views need the admin token: nothing is 401, a client's
// token 403, and a browser is sent to the login page; the admin's token
// (header or login cookie) opens them. The public never reads the
// dashboard with its /v1 queue names, keys and agents.
func TestOperatorViewsNeedTheAdminToken(t *testing.T) {
	ts := startService(t, 0, func(c *Config) { c.WebApp = webapp.Handler(); c.dashEvery = 50 * time.Millisecond })
	clientTok := ts.createToken(t, tokens.Client)
	for _, path := range []string{"/metrics", "/api/dashboard", "/dashboard"} {
		if code, h, body := send(t, ts.srv, "GET", path, "", nil); code != 401 || h.Get("WWW-Authenticate") == "" || !strings.Contains(body, "error") {
			t.Errorf("%s without a token: %d %q", path, code, body)
		}
		if code, _, body := send(t, ts.srv, "GET", path, "", bearer(clientTok)); code != 403 || !strings.Contains(body, "admin token") {
			t.Errorf("%s with a client token: %d %q", path, code, body)
		}
		if code, h, _ := send(t, ts.srv, "GET", path, "", http.Header{"Accept": {"text/html"}}); code != 303 ||
			h.Get("Location") != "/login?next="+url.QueryEscape(path) {
			t.Errorf("%s from a browser without a login: %d to %q", path, code, h.Get("Location"))
		}
		if code, _, _ := send(t, ts.srv, "GET", path, "", bearer(ts.admin)); code != 200 {
			t.Errorf("%s with the admin token: %d", path, code)
		}
		if code, _, _ := send(t, ts.srv, "GET", path, "", loginCookie(ts.admin)); code != 200 {
			t.Errorf("%s with the admin's login cookie: %d", path, code)
		}
	}
	// Deleting a share is an operator's action too.
	if code, _, body := send(t, ts.srv, "DELETE", "/api/shares/AAAAAAAAAAAAAAAAAAAAAA", "", bearer(clientTok)); code != 403 {
		t.Errorf("deleting a share with a client token: %d %q", code, body)
	}
	if code, _, body := send(t, ts.srv, "DELETE", "/api/shares/AAAAAAAAAAAAAAAAAAAAAA", "", bearer(ts.admin)); code != 404 {
		t.Errorf("deleting an unknown share with the admin token: %d %q; want 404", code, body)
	}
	// Without --auth the rest stays open.
	for _, path := range []string{"/", "/jobs", "/jobs/job/3", "/api/info", "/livez", "/readyz", "/login"} {
		if code, _, _ := send(t, ts.srv, "GET", path, "", nil); code != 200 {
			t.Errorf("%s: %d; want 200 without --auth", path, code)
		}
	}
}

// With --admin-listen the operator views live there alone, without a
// token; the public listener does not have them. Of the share API the
// admin listener has only the operator's DELETE (a GET is 405).
func TestAdminListenServesTheOperatorViewsAlone(t *testing.T) {
	ts := startService(t, 0, func(c *Config) { c.WebApp = webapp.Handler(); c.AdminAddr = "127.0.0.1:0" })
	admin := httptest.NewServer(ts.AdminHandler())
	t.Cleanup(admin.Close)
	for _, path := range []string{"/metrics", "/api/dashboard", "/dashboard"} {
		if code, _, _ := send(t, ts.srv, "GET", path, "", bearer(ts.admin)); code != 404 {
			t.Errorf("public %s with the admin token: %d; want 404", path, code)
		}
		if code, _, _ := send(t, admin, "GET", path, "", nil); code != 200 {
			t.Errorf("admin listener %s: %d; want 200", path, code)
		}
	}
	for path, want := range map[string]int{"/assets/dashboard.js": 200, "/asy": 404, "/api/shares/abc": 405, "/v1/queues": 404} {
		if code, _, _ := send(t, admin, "GET", path, "", nil); code != want {
			t.Errorf("admin listener %s: %d; want %d", path, code, want)
		}
	}
}

// With --auth every compile path, the share API and the web app need an
// admin or client token (header or login cookie); /livez, /readyz and the
// login page stay open and /v1 keeps its own tokens. Without --auth the
// same requests work as before.
func TestLoginGuardsEveryCompilePath(t *testing.T) {
	for _, login := range []bool{true, false} {
		ts := startService(t, 1, func(c *Config) { c.WebApp = webapp.Handler(); c.Access.Login = login })
		clientTok, agentTok := ts.createToken(t, tokens.Client), ts.createToken(t, tokens.Agent)
		refused := func(code int) bool { return login == (code == 401 || code == 303) }
		share := shareBody("main.asy")
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/api/shares", share}, {"GET", "/api/shares/abcdefghij", ""}, {"GET", "/api/info", ""},
			{"GET", "/", ""}, {"GET", "/s/abcdefghij", ""}, {"GET", "/assets/app.js", ""},
		} {
			code, _, body := send(t, ts.srv, c.method, c.path, c.body, nil)
			if !refused(code) {
				t.Errorf("auth %v: %s %s without a token: %d %q", login, c.method, c.path, code, body)
			}
			if code, _, _ := send(t, ts.srv, c.method, c.path, c.body, bearer(agentTok)); !refused(code) {
				t.Errorf("auth %v: %s %s with an agent token: %d", login, c.method, c.path, code)
			}
			if code, _, _ := send(t, ts.srv, c.method, c.path, c.body, bearer(clientTok)); code == 401 {
				t.Errorf("auth %v: %s %s with a client token: 401", login, c.method, c.path)
			}
		}
		if code, _, _ := send(t, ts.srv, "GET", "/", "", http.Header{"Accept": {"text/html"}}); login && code != 303 {
			t.Errorf("the web app without a login: %d; want 303 to the login page", code)
		}
		for _, path := range []string{"/livez", "/readyz", "/login"} {
			if code, _, _ := send(t, ts.srv, "GET", path, "", nil); code != 200 {
				t.Errorf("auth %v: %s: %d", login, path, code)
			}
		}
		if code, _, _ := send(t, ts.srv, "GET", "/v1/queues", "", nil); code != 401 {
			t.Errorf("/v1 without its token: %d", code)
		}
		if code, _, _ := send(t, ts.srv, "GET", "/v1/queues", "", bearer(ts.admin)); code != 200 {
			t.Errorf("/v1 with the admin token: %d", code)
		}
		c, resp := dialWith(t, ts.srv, nil)
		if login {
			if c != nil || resp.StatusCode != 401 {
				t.Fatalf("/asy without a token: %v", resp.Status)
			}
			for _, h := range []http.Header{bearer(clientTok), {"Cookie": {access.CookieName + "=" + ts.admin}}} {
				c, resp := dialWith(t, ts.srv, h)
				if c == nil {
					t.Fatalf("/asy with %v: %s", h, resp.Status)
				}
				compileOK(t, c)
			}
		} else {
			if c == nil {
				t.Fatalf("/asy without --auth: %s", resp.Status)
			}
			compileOK(t, c)
		}
	}
}

// A WebSocket from an origin that is not allowed is refused with 403
// before the upgrade; the allowed one and the server's own compile.
func TestAsyRefusesOtherOrigins(t *testing.T) {
	ts := startService(t, 1, func(c *Config) {
		o, err := access.NewOrigins([]string{"https://forum.example.org"})
		if err != nil {
			t.Fatal(err)
		}
		c.Access.Origins = o
	})
	c, resp := dialWith(t, ts.srv, http.Header{"Origin": {"https://evil.example"}})
	if c != nil || resp.StatusCode != 403 {
		t.Fatalf("/asy from another origin: %v", resp.Status)
	}
	var body struct{ Error string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || !strings.Contains(body.Error, "evil.example") {
		t.Fatalf("403 body: %v %q", err, body.Error)
	}
	for _, origin := range []string{"https://forum.example.org", ts.srv.URL} {
		c, resp := dialWith(t, ts.srv, http.Header{"Origin": {origin}})
		if c == nil {
			t.Fatalf("/asy from %s: %s", origin, resp.Status)
		}
		compileOK(t, c)
	}
	pre := http.Header{"Origin": {"https://forum.example.org"}, "Access-Control-Request-Method": {"POST"}}
	if code, h, _ := send(t, ts.srv, "OPTIONS", "/api/shares", "", pre); code != 204 || h.Get("Access-Control-Allow-Origin") != "https://forum.example.org" {
		t.Fatalf("share API preflight: %d %v", code, h)
	}
	if code, _, _ := send(t, ts.srv, "POST", "/api/shares", shareBody("main.asy"), http.Header{"Origin": {"https://evil.example"}}); code != 403 {
		t.Fatalf("share from another origin: %d", code)
	}
}

// Share creation is rate limited per client: past the rate, 429 with
// Retry-After and JSON {error}. An untrusted peer that forges
// X-Forwarded-For stays itself; behind a trusted proxy each forwarded
// client has its own rate.
func TestShareRateLimitPerClient(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		ts := startService(t, 0, func(c *Config) {
			c.Access.ShareRate = access.Rate{N: 2, Per: time.Hour}
			if trusted {
				p, err := access.NewProxies([]string{"127.0.0.1"}, access.XForwardedFor)
				if err != nil {
					t.Fatal(err)
				}
				c.Access.Proxies = p
			}
		})
		for i := range 2 {
			body := shareBody(fmt.Sprintf("main%d.asy", i))
			if code, _, _ := send(t, ts.srv, "POST", "/api/shares", body, http.Header{"X-Forwarded-For": {"198.51.100.1"}}); code != 201 {
				t.Fatalf("share %d: %d", i+1, code)
			}
		}
		code, h, body := send(t, ts.srv, "POST", "/api/shares", shareBody("main2.asy"), http.Header{"X-Forwarded-For": {"198.51.100.1"}})
		if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(body, `"error"`) {
			t.Fatalf("third share: %d, Retry-After %q, %q", code, h.Get("Retry-After"), body)
		}
		code, _, _ = send(t, ts.srv, "POST", "/api/shares", shareBody("main3.asy"), http.Header{"X-Forwarded-For": {"198.51.100.2"}})
		if want := map[bool]int{false: 429, true: 201}[trusted]; code != want {
			t.Fatalf("trusted %v: another X-Forwarded-For: %d; want %d", trusted, code, want)
		}
	}
}

// In multi-node mode a queue server checks logins and the admin token
// against the tokens the schedulers keep in Redis.
func TestRedisModeLoginUsesTheTokensInRedis(t *testing.T) {
	url := redistest.Start(t).URL()
	ts := startService(t, 0, func(c *Config) { c.Redis = RedisConfig{URL: url, Node: "front-1"}; c.Access.Login = true })
	rdb, err := redisq.Open(t.Context(), url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	store := tokens.OpenRedis(rdb, redisq.DefaultPrefix, 0, nil)
	_, clientTok, err := store.Create(t.Context(), "client", tokens.Client)
	if err != nil {
		t.Fatal(err)
	}
	_, adminTok, err := store.Create(t.Context(), "admin", tokens.Admin)
	if err != nil {
		t.Fatal(err)
	}
	share := shareBody("main.asy")
	if code, _, _ := send(t, ts.srv, "POST", "/api/shares", share, nil); code != 401 {
		t.Fatalf("share without a token: %d", code)
	}
	if code, _, body := send(t, ts.srv, "POST", "/api/shares", share, bearer(clientTok)); code != 201 {
		t.Fatalf("share with a client token from Redis: %d %q", code, body)
	}
	if code, _, _ := send(t, ts.srv, "GET", "/metrics", "", bearer(clientTok)); code != 403 {
		t.Fatalf("/metrics with a client token: %d", code)
	}
	if code, _, _ := send(t, ts.srv, "GET", "/metrics", "", bearer(adminTok)); code != 200 {
		t.Fatalf("/metrics with an admin token from Redis: %d", code)
	}
}

// Serving with --admin-listen: the operator views answer on their own
// listener without a token, the public listener has none of them, and
// both stop at shutdown.
func TestServeListenersSplitsTheOperatorViews(t *testing.T) {
	svc, err := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DataPath: filepath.Join(t.TempDir(), "usher.db"),
		AdminAddr: "127.0.0.1:0", WebApp: webapp.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	public, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.ServeListeners(ctx, public, admin) }()
	get := func(ln net.Listener, path string) int {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return get(public, "/readyz") == 200 }, "the public listener ready")
	for path, want := range map[string][2]int{"/metrics": {404, 200}, "/dashboard": {404, 200}, "/api/info": {200, 404}} {
		if got := [2]int{get(public, path), get(admin, path)}; got != want {
			t.Errorf("%s: public, admin = %v; want %v", path, got, want)
		}
	}
	stop()
	if err := testwait.Receive(t, 30*time.Second, done, "ServeListeners to return"); err != nil {
		t.Fatal(err)
	}
	if get(admin, "/metrics") != 0 {
		t.Fatal("the admin listener still answers after shutdown")
	}
}

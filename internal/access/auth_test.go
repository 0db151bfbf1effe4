package access

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/tokens"
)

// secrets are the tokens of a real token store in a SQLite file.
type secrets struct {
	store                *tokens.Store
	admin, client, agent string
}

func openTokens(t *testing.T) secrets {
	t.Helper()
	db, err := sqlitedb.Open(t.Context(), filepath.Join(t.TempDir(), "usher.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := tokens.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	s := secrets{store: store}
	for role, dst := range map[tokens.Role]*string{tokens.Admin: &s.admin, tokens.Client: &s.client, tokens.Agent: &s.agent} {
		if _, *dst, err = store.Create(t.Context(), string(role), role); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// how a request carries a token.
type carrier int

const (
	none carrier = iota
	bearerHeader
	cookie
)

func withToken(r *http.Request, how carrier, secret string) *http.Request {
	switch how {
	case bearerHeader:
		r.Header.Set("Authorization", "Bearer "+secret)
	case cookie:
		r.AddCookie(&http.Cookie{Name: CookieName, Value: secret})
	}
	return r
}

// With --auth, every path but the open ones needs an admin or client
// token, by header or cookie; agents and unknown tokens are refused; a
// browser loading a page is sent to the login page. Without --auth the
// same requests all reach the handler.
func TestRequireLogin(t *testing.T) {
	s := openTokens(t)
	open := []string{"/livez", "/login", "/v1/"}
	for _, login := range []bool{true, false} {
		var w work
		h := New(Config{Login: login, Tokens: s.store}).RequireLogin(open, &w)
		for _, c := range []struct {
			name, path string
			how        carrier
			secret     string
			page       bool
			want       int
		}{
			{"no token, API", "/api/shares", none, "", false, 401},
			{"no token, /asy", "/asy", none, "", false, 401},
			{"no token, page", "/", none, "", true, 303},
			{"client bearer", "/api/shares", bearerHeader, s.client, false, 200},
			{"admin cookie", "/asy", cookie, s.admin, false, 200},
			{"client cookie, page", "/", cookie, s.client, true, 200},
			{"agent", "/api/shares", bearerHeader, s.agent, false, 401},
			{"unknown token", "/api/shares", bearerHeader, "usher_not-a-token-at-all", false, 401},
			{"wrong bearer beats a good cookie", "/api/shares", bearerHeader, "nope-nope-nope-nope", false, 401},
			{"open: /livez", "/livez", none, "", false, 200},
			{"open: /v1", "/v1/queues", none, "", false, 200},
			{"not open: /v1x", "/v1x", none, "", false, 401},
		} {
			r := withToken(httptest.NewRequest(http.MethodGet, "http://usher.example"+c.path, nil), c.how, c.secret)
			if c.name == "wrong bearer beats a good cookie" {
				r.AddCookie(&http.Cookie{Name: CookieName, Value: s.admin})
			}
			if c.page {
				r.Header.Set("Accept", "text/html,application/xhtml+xml")
			}
			want := c.want
			if !login {
				want = 200
			}
			rec := do(h, r)
			if rec.Code != want {
				t.Errorf("auth %v, %s: %d; want %d", login, c.name, rec.Code, want)
				continue
			}
			switch want {
			case 401:
				errorText(t, rec)
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("%s: 401 without WWW-Authenticate", c.name)
				}
			case 303:
				if loc := rec.Header().Get("Location"); loc != "/login?next="+url.QueryEscape(c.path) {
					t.Errorf("%s: redirect to %q", c.name, loc)
				}
			}
		}
	}
}

// The operator views need an admin token, with or without --auth: none
// is 401, a client's is 403, an admin's header or cookie goes through.
func TestRequireAdmin(t *testing.T) {
	s := openTokens(t)
	var w work
	h := New(Config{Tokens: s.store}).RequireAdmin(&w)
	for _, c := range []struct {
		name   string
		how    carrier
		secret string
		page   bool
		want   int
	}{
		{"nothing", none, "", false, 401},
		{"client", bearerHeader, s.client, false, 403},
		{"agent", bearerHeader, s.agent, false, 401},
		{"admin bearer", bearerHeader, s.admin, false, 200},
		{"admin cookie", cookie, s.admin, false, 200},
		{"browser without a login", none, "", true, 303},
		{"browser logged in as a client", cookie, s.client, true, 303},
		{"browser logged in as admin", cookie, s.admin, true, 200},
	} {
		r := withToken(httptest.NewRequest(http.MethodGet, "http://usher.example/metrics", nil), c.how, c.secret)
		if c.page {
			r.Header.Set("Accept", "text/html")
		}
		rec := do(h, r)
		if rec.Code != c.want {
			t.Errorf("%s: %d; want %d", c.name, rec.Code, c.want)
		}
		if c.want == 403 && !strings.Contains(errorText(t, rec), "admin token") {
			t.Errorf("%s: 403 does not say an admin token is needed", c.name)
		}
	}
}

func loginForm(token, next string) *http.Request {
	form := url.Values{"token": {token}, "next": {next}}
	r := httptest.NewRequest(http.MethodPost, "http://usher.example/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "203.0.113.1:1"
	return r
}

// Logging in sets an HttpOnly, SameSite=Lax cookie holding a token that
// is known, Secure when the client came over TLS (directly or as a
// trusted proxy says); unknown and agent tokens get the page again with
// the reason; a cross-site form is refused; next stays on this server;
// logging out deletes the cookie.
func TestLoginAndLogout(t *testing.T) {
	s := openTokens(t)
	proxies := mustProxies(t, XForwardedFor, "10.0.0.0/8")
	p := New(Config{Tokens: s.store, Proxies: proxies})
	mux := http.NewServeMux()
	p.LoginRoutes(mux)

	rec := do(mux, loginForm(s.client, "/s/abc"))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/s/abc" {
		t.Fatalf("login: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	c := rec.Result().Cookies()
	if len(c) != 1 || c[0].Name != CookieName || c[0].Value != s.client || !c[0].HttpOnly ||
		c[0].SameSite != http.SameSiteLaxMode || c[0].Secure || c[0].Path != "/" || c[0].MaxAge <= 0 {
		t.Fatalf("login cookie %+v", c)
	}
	tlsReq := loginForm(s.admin, "")
	tlsReq.TLS = &tls.ConnectionState{}
	viaProxy := loginForm(s.admin, "")
	viaProxy.RemoteAddr, viaProxy.Header["X-Forwarded-Proto"] = "10.0.0.1:1", []string{"https"}
	forged := loginForm(s.admin, "")
	forged.Header["X-Forwarded-Proto"] = []string{"https"}
	for name, r := range map[string]*http.Request{"TLS": tlsReq, "trusted proxy": viaProxy, "forged proto": forged} {
		c := do(mux, r).Result().Cookies()
		if want := name != "forged proto"; len(c) != 1 || c[0].Secure != want {
			t.Errorf("%s: cookie %+v; want Secure %v", name, c, want)
		}
	}
	for _, c := range []struct {
		token string
		want  int
		text  string
	}{{"usher_unknown-token-here", 401, textBadToken}, {s.agent, 403, textAgentToken}, {"", 401, "enter a token"}} {
		rec := do(mux, loginForm(c.token, "/"))
		if rec.Code != c.want || !strings.Contains(rec.Body.String(), c.text) || len(rec.Result().Cookies()) != 0 {
			t.Errorf("login with %q: %d, cookies %v, body lacks %q", c.token, rec.Code, rec.Result().Cookies(), c.text)
		}
	}
	cross := loginForm(s.admin, "/")
	cross.Header.Set("Origin", "https://evil.example")
	if rec := do(mux, cross); rec.Code != 403 || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("cross-site login: %d", rec.Code)
	}
	for _, next := range []string{"//evil.example/x", "https://evil.example", `/\evil.example`, "dashboard"} {
		if loc := do(mux, loginForm(s.admin, next)).Header().Get("Location"); loc != "/" {
			t.Errorf("next %q redirected to %q; want /", next, loc)
		}
	}
	out := httptest.NewRequest(http.MethodPost, "http://usher.example/logout", nil)
	out.AddCookie(&http.Cookie{Name: CookieName, Value: s.admin})
	rec = do(mux, out)
	if c := rec.Result().Cookies(); rec.Code != 303 || len(c) != 1 || c[0].Name != CookieName || c[0].MaxAge >= 0 || c[0].Value != "" {
		t.Fatalf("logout: %d, cookies %+v", rec.Code, c)
	}
	page := httptest.NewRequest(http.MethodGet, "http://usher.example/login?next=/dashboard", nil)
	page.AddCookie(&http.Cookie{Name: CookieName, Value: s.admin})
	rec = do(mux, page)
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, `id="who"`) || !strings.Contains(body, `value="/dashboard"`) {
		t.Fatalf("login page when logged in: %d\n%s", rec.Code, body)
	}
}

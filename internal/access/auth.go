package access

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/tokens"
)

// CookieName is the cookie the login page sets. It holds the token
// itself: every queue server of multi-node mode can check it against the
// shared token store without a session table, and deleting the token in
// the store ends every browser's login with it.
const CookieName = "usher_token"

// cookieAge is how long a browser keeps a login.
const cookieAge = 30 * 24 * time.Hour

// Texts of the refusals, one definition each (docs/api.md, "Access").
const (
	textLoginNeeded = "log in first: send Authorization: Bearer <token>, or log in at /login"
	textBadToken    = "that token is not known"
	textAgentToken  = "an agent token cannot log in: use an admin or client token"
	textAdminNeeded = "this is an operator view: it needs an admin token"
	textStoreDown   = "the token store cannot be read now; try again"
)

// errNoToken, errBadToken and errAgent are why a request has no user.
var (
	errNoToken  = errors.New(textLoginNeeded)
	errBadToken = errors.New(textBadToken)
	errAgent    = errors.New(textAgentToken)
)

// bearer is the token of an Authorization: Bearer header; present is
// false when the request has no such header.
func bearer(r *http.Request) (tok string, present bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true // present but not a bearer token: refused, not ignored
	}
	return strings.TrimSpace(tok), true
}

// credential is the token a request carries: the Authorization header
// when there is one (a wrong header is not made good by a cookie), else
// the login cookie.
func credential(r *http.Request) string {
	if tok, present := bearer(r); present {
		return tok
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return c.Value
	}
	return ""
}

// user finds the token of the request's credential: an admin or client
// token. Agents run jobs; they do not log in.
func user(ctx context.Context, store *tokens.Store, secret string) (tokens.Token, error) {
	if secret == "" {
		return tokens.Token{}, errNoToken
	}
	if store == nil {
		return tokens.Token{}, errBadToken
	}
	t, err := store.Lookup(ctx, secret)
	switch {
	case errors.Is(err, tokens.ErrNotFound):
		return tokens.Token{}, errBadToken
	case err != nil:
		return tokens.Token{}, err
	case t.Role == tokens.Agent:
		return tokens.Token{}, errAgent
	}
	return t, nil
}

// loginCookie is the cookie that keeps a login: HttpOnly, SameSite=Lax,
// and Secure when the client reached the server over TLS.
func loginCookie(secret string, secure bool) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: secret, Path: "/", MaxAge: int(cookieAge / time.Second),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
}

// logoutCookie deletes the login cookie.
func logoutCookie(secure bool) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
}

// wantsPage says whether a refused request should get the login page
// rather than JSON: a browser navigating to a page.
func wantsPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.Contains(r.Header.Get("Accept"), "text/html") && r.Header.Get("Upgrade") == ""
}

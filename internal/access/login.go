package access

import (
	"html/template"
	"net/http"
	"strings"
)

// LoginRoutes registers the login page: GET /login shows it, POST /login
// checks the token and sets the login cookie, POST /logout deletes it.
// Both POSTs accept only the server's own origin (a cross-site form
// cannot log a browser in or out).
func (p *Policy) LoginRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /login", p.loginPage)
	mux.HandleFunc("POST /login", p.login)
	mux.HandleFunc("POST /logout", p.logout)
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>usher — log in</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#222;background:#fafafa}
@media (prefers-color-scheme:dark){body{color:#ddd;background:#1b1b1b}input{background:#2a2a2a;color:#ddd}}
h1{font-size:1.4rem}label{display:block;margin:.5rem 0 .25rem}
input[type=password]{width:100%;box-sizing:border-box;padding:.4rem;font:inherit}
button{margin-top:.8rem;padding:.4rem 1rem;font:inherit}
.error{color:#b00020}.who{margin-bottom:1rem}
</style></head><body>
<h1>usher</h1>
{{if .Who}}<p class="who" id="who">Logged in as <b>{{.Who}}</b> ({{.Role}}).</p>
<form method="post" action="/logout"><button type="submit" id="logout">Log out</button></form>
{{end}}
<form method="post" action="/login">
<label for="token">Token</label>
<input type="password" id="token" name="token" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="{{.Next}}">
{{if .Error}}<p class="error" id="error" role="alert">{{.Error}}</p>{{end}}
<button type="submit" id="login">Log in</button>
</form>
<p><small>Ask the operator for a token (usher token create NAME --role client).</small></p>
</body></html>
`))

type loginView struct {
	Who, Role, Next, Error string
}

func (p *Policy) loginPage(w http.ResponseWriter, r *http.Request) {
	v := loginView{Next: safeNext(r.URL.Query().Get("next"))}
	if t, err := user(r.Context(), p.cfg.Tokens, credential(r)); err == nil {
		v.Who, v.Role = t.Name, string(t.Role)
	}
	renderLogin(w, http.StatusOK, v)
}

func renderLogin(w http.ResponseWriter, status int, v loginView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_ = loginTemplate.Execute(w, v)
}

func (p *Policy) login(w http.ResponseWriter, r *http.Request) {
	if err := (Origins{}).Check(r); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		renderLogin(w, http.StatusBadRequest, loginView{Error: "the login form could not be read"})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	if _, err := user(r.Context(), p.cfg.Tokens, secret); err != nil {
		status := map[error]int{errNoToken: http.StatusUnauthorized, errBadToken: http.StatusUnauthorized,
			errAgent: http.StatusForbidden}[err]
		text := err.Error()
		if status == 0 {
			p.cfg.Logger.Error("access: token lookup failed", "err", err)
			status, text = http.StatusServiceUnavailable, textStoreDown
		}
		if err == errNoToken {
			text = "enter a token"
		}
		renderLogin(w, status, loginView{Next: next, Error: text})
		return
	}
	http.SetCookie(w, loginCookie(secret, p.cfg.Proxies.Secure(r)))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (p *Policy) logout(w http.ResponseWriter, r *http.Request) {
	if err := (Origins{}).Check(r); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	http.SetCookie(w, logoutCookie(p.cfg.Proxies.Secure(r)))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext keeps a redirect target on this server: a path, never
// another host ("//evil", "/\evil", "https://...").
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.HasPrefix(next, "/\\") || strings.ContainsAny(next, "\r\n\t") {
		return "/"
	}
	return next
}

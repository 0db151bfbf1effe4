package service

import (
	"net/http"
)

// indexPage is the minimal page at / until the web app lands.
func indexPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>usher</title></head>
<body><h1>usher</h1>
<p>An Asymptote compile service. Connect a WebSocket client to <code>/asy</code>
(see docs/protocol.md); health at <a href="/livez">/livez</a> and
<a href="/readyz">/readyz</a>, metrics at <a href="/metrics">/metrics</a>.</p>
</body></html>
`))
}

package service

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/access"
	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/openapitest"
	"github.com/usherhq/usher/internal/renderapi"
)

// The render API's answers, from a real service running real asy, are
// the ones the OpenAPI document declares (docs/api.md, "The OpenAPI
// document"): each status is declared for its operation, each JSON error
// matches its schema, which refuses fields it does not name, and each
// image has a media type the document names. Every render operation is
// seen to succeed and to fail. (internal/renderapi's TestOpenAPIRenderRoutes
// checks the routes and parameters.)
func TestOpenAPIRenderAnswers(t *testing.T) {
	ts := startService(t, 1, nil)
	doc := openapitest.Load(t, jobsapi.OpenAPI())
	send := func(method, path, ctype string, body []byte, hdr http.Header, want int) answer {
		t.Helper()
		return sendChecked(t, doc, ts.srv.URL, method, path, ctype, body, hdr, want)
	}
	figure := []byte(quickFigure)
	a := send("POST", "/api/render?format=svg", "text/plain", figure, nil, 200)
	loc := a.header.Get("Content-Location")
	send("GET", loc, "", nil, nil, 200)
	send("GET", loc, "", nil, http.Header{"If-None-Match": {a.header.Get("ETag")}}, 304)
	send("GET", "/api/render?format=png&src="+url.QueryEscape(quickFigure), "", nil, nil, 200)
	body, ctype := multipartBody(t, []part{{field: "main", name: "a.asy", data: quickFigure}, {field: "timeout", data: ""}})
	send("POST", "/api/render?format=pdf", ctype, body, nil, 200)

	send("POST", "/api/render?format=gif", "text/plain", figure, nil, 400)
	send("POST", "/api/render", "application/json", []byte("{}"), nil, 415)
	send("POST", "/api/render", "text/plain", bytes.Repeat([]byte("/"), int(ts.queueCfg.MaxUpload)+1), nil, 413)
	failed := send("POST", "/api/render", "text/plain", []byte("draw((0,0)--(1,1)\n"), nil, 422)
	if _, output := failed.errorText(t); output == "" {
		t.Errorf("a failed figure's answer has no output: %s", failed.body)
	}
	send("GET", "/api/render?format=svg", "", nil, nil, 400)
	send("GET", "/api/render?src="+url.QueryEscape(strings.Repeat("//", renderapi.MaxQuerySource)), "", nil, nil, 414)
	send("GET", "/api/render/"+strings.Repeat("0", 64)+".svg", "", nil, nil, 404)
	send("GET", "/embed.js", "", nil, nil, 200)
	ts.waitIdle(t)

	// With --auth, --allowed-origins and --render-rate: the refusals.
	guarded := startService(t, 0, func(c *Config) {
		o, err := access.NewOrigins([]string{"https://forum.example"})
		if err != nil {
			t.Fatal(err)
		}
		c.Access.Origins, c.Access.Login = o, true
		c.Access.RenderRate = access.Rate{N: 1, Per: time.Hour}
	})
	bearer := http.Header{"Authorization": {"Bearer " + guarded.admin}}
	gsend := func(method, path string, hdr http.Header, want int) {
		t.Helper()
		sendChecked(t, doc, guarded.srv.URL, method, path, "text/plain", figure, hdr, want)
	}
	gsend("GET", "/embed.js", nil, 401)
	gsend("POST", "/api/render", nil, 401)
	gsend("GET", "/api/render?src=x", nil, 401)
	gsend("GET", "/api/render/"+strings.Repeat("0", 64)+".svg", nil, 401)
	gsend("GET", "/embed.js", http.Header{"Authorization": bearer["Authorization"], "Origin": {"https://elsewhere.example"}}, 403)
	gsend("POST", "/api/render?format=gif", bearer, 400)
	gsend("POST", "/api/render?format=gif", bearer, 429)

	doc.Covered(t, "/api/render")
	doc.Covered(t, "/embed.js")
}

// sendChecked sends a request to the server at base, fails the test
// unless its status is want, and checks the answer against the document.
func sendChecked(t *testing.T, doc *openapitest.Doc, base, method, path, ctype string, body []byte, hdr http.Header, want int) answer {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	o, ok := doc.Find(req)
	if !ok {
		t.Fatalf("%s %s: no operation of the document matches", method, path)
	}
	a := do(t, req)
	if a.status != want {
		t.Fatalf("%s %s = %d %.200s; want %d", method, path, a.status, a.body, want)
	}
	doc.Check(t, o, &http.Response{StatusCode: a.status, Header: a.header}, a.body)
	return a
}

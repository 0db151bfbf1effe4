// Package renderapi is the render API: Asymptote over plain HTTP for
// pages, wikis and forums (docs/api.md, "Render API"). POST or GET a
// figure's source and get its image; every result has a permanent,
// content-addressed URL. Renders are ordinary tasks of the queue
// (asyqueue.Server.Render): same sandbox, tiers, caps, estimates,
// dashboard and result cache as /asy. The package also serves /embed.js,
// which turns <pre class="asy"> blocks of any page into figures.
package renderapi

import (
	"crypto/sha256"
	_ "embed" // embed.js
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/sandbox"
)

// API serves the render API's routes.
type API struct {
	srv     *asyqueue.Server
	sources Sources
	lim     limits
	client  func(*http.Request) string
	logger  *slog.Logger
	hot     *hotResults
	metrics *metrics
}

// New returns the render API over srv, keeping sources in sources; its
// metrics go to reg when it is not nil.
func New(srv *asyqueue.Server, sources Sources, reg prometheus.Registerer, logger *slog.Logger) *API {
	cfg := srv.Config()
	if logger == nil {
		logger = slog.Default()
	}
	return &API{srv: srv, sources: sources, lim: limits{maxFiles: cfg.MaxFiles, maxUpload: cfg.MaxUpload},
		client: cfg.ClientAddress, logger: logger, hot: newHotResults(DefaultHotBytes), metrics: newMetrics(reg)}
}

// Mux is where Register adds the routes: an *http.ServeMux.
type Mux interface {
	Handle(pattern string, handler http.Handler)
}

// Register adds the render API's routes to mux. cors applies the
// deployment's origin policy (and answers preflights); compute, on the
// routes that may run asy, adds the per-client render rate to it. Every
// route but the CORS preflights has an operation in the OpenAPI document
// (internal/jobsapi/openapi.json), which openapi_test.go checks.
func (a *API) Register(mux Mux, cors, compute func(http.Handler) http.Handler) {
	mux.Handle("POST /api/render", compute(a.metrics.count("post", a.post)))
	mux.Handle("GET /api/render", compute(a.metrics.count("query", a.getQuery)))
	mux.Handle("GET /api/render/{file}", cors(a.metrics.count("id", a.getByID)))
	mux.Handle("OPTIONS /api/render", cors(http.NotFoundHandler()))
	mux.Handle("OPTIONS /api/render/{file}", cors(http.NotFoundHandler()))
	mux.Handle("GET /embed.js", cors(http.HandlerFunc(serveEmbedJS)))
}

func (a *API) post(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, a.lim.maxUpload+multipartOverhead)
	task, aerr := parsePost(r, a.lim)
	if aerr != nil {
		writeError(w, aerr.status, aerr.text, nil)
		return
	}
	a.render(w, r, task)
}

func (a *API) getQuery(w http.ResponseWriter, r *http.Request) {
	task, aerr := parseQuery(r.URL.RawQuery)
	if aerr != nil {
		writeError(w, aerr.status, aerr.text, nil)
		return
	}
	a.render(w, r, task)
}

// render runs task, keeps its source for the permanent URL and answers.
func (a *API) render(w http.ResponseWriter, r *http.Request, task sandbox.Task) {
	res, ok := a.run(w, r, task)
	if !ok {
		return
	}
	if err := a.sources.Put(r.Context(), res.ID, task); err != nil {
		a.logger.Warn("render: keeping the source failed", "id", res.ID, "err", err)
	}
	writeImage(w, r, res.ID, task.Format, res)
}

// getByID serves /api/render/{id}.{format}: the result the cache holds
// under id or, when it has been evicted, the result of the source kept
// under id, computed again.
func (a *API) getByID(w http.ResponseWriter, r *http.Request) {
	id, format, ok := strings.Cut(r.PathValue("file"), ".")
	if !ok || !validID(id) {
		writeError(w, http.StatusNotFound, "no such render: the path is /api/render/{id}.{format} with a 64-digit hex id", nil)
		return
	}
	key := id + "." + format
	if e, ok := a.hot.get(key); ok {
		writeBytes(w, r, id, format, e.data, e.etag)
		return
	}
	if res, ok := a.srv.Cached(r.Context(), id); ok {
		if data, ok := res.Image(format); ok {
			a.hot.put(hotEntry{key: key, data: data, etag: etagOf(data)})
			writeImage(w, r, id, format, res)
			return
		}
	}
	task, found, err := a.sources.Get(r.Context(), id)
	if err != nil {
		a.logger.Warn("render: reading a source failed", "id", id, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the render store is unavailable; try again", nil)
		return
	}
	if !found || task.Format != format {
		writeError(w, http.StatusNotFound, "no such render: "+id+"."+format, nil)
		return
	}
	res, ok := a.run(w, r, task)
	if !ok {
		return
	}
	writeImage(w, r, id, format, res)
}

// run renders task; when it cannot answer with an image it writes the
// error and returns false.
func (a *API) run(w http.ResponseWriter, r *http.Request, task sandbox.Task) (asyqueue.RenderResult, bool) {
	res, err := a.srv.Render(r.Context(), a.client(r), task)
	if err != nil {
		a.refuse(w, r, err)
		return res, false
	}
	if !res.Success {
		status, retry := failureStatus(res.Error)
		if retry {
			w.Header().Set("Retry-After", retryAfter)
		}
		writeError(w, status, res.Error, outputText(res))
		return res, false
	}
	if _, ok := res.Image(task.Format); !ok {
		writeError(w, http.StatusUnprocessableEntity, "asy produced no "+task.Format+" image", outputText(res))
		return res, false
	}
	return res, true
}

// retryAfter is the Retry-After of a render refused for the server's
// state (a full queue, a shutdown, a lost backend), in seconds.
const retryAfter = "5"

// refuse answers a render that did not run: bad input 400, the queue's
// denials 503 with Retry-After.
func (a *API) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client is gone
	}
	var d *asyqueue.DeniedError
	if !errors.As(err, &d) {
		a.logger.Warn("render failed", "err", err)
		writeError(w, http.StatusInternalServerError, "render failed", nil)
		return
	}
	switch {
	case errors.Is(d, asyqueue.ErrBadRequest), errors.Is(d, asyqueue.ErrInvalidLimit):
		writeError(w, http.StatusBadRequest, d.Text, nil)
	default:
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusServiceUnavailable, d.Text, nil)
	}
}

// failureStatus is the status of a run that failed: the figure's fault
// (422) or the server's (503, may be retried).
func failureStatus(text string) (int, bool) {
	if asyqueue.ServerFault(text) {
		return http.StatusServiceUnavailable, true
	}
	return http.StatusUnprocessableEntity, false
}

func outputText(res asyqueue.RenderResult) *string {
	var b strings.Builder
	for _, o := range res.Output {
		b.Write(o.Data)
	}
	s := b.String()
	return &s
}

// errorBody is every error answer's JSON.
type errorBody struct {
	Error  string  `json:"error"`
	Output *string `json:"output,omitempty"`
}

func writeError(w http.ResponseWriter, status int, text string, output *string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: text, Output: output})
}

// writeImage answers with the result's image in format, or 304 when the
// client has it.
func writeImage(w http.ResponseWriter, r *http.Request, id, format string, res asyqueue.RenderResult) {
	data, _ := res.Image(format)
	writeBytes(w, r, id, format, data, etagOf(data))
}

// etagOf is the strong ETag of a result: a hash of its bytes.
func etagOf(data []byte) string {
	sum := sha256.Sum256(data)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

func writeBytes(w http.ResponseWriter, r *http.Request, id, format string, data []byte, etag string) {
	h := w.Header()
	setResultHeaders(h, id, format)
	h.Set("ETag", etag)
	if noneMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(data)
}

// noneMatch reports whether an If-None-Match header names etag.
func noneMatch(header, etag string) bool {
	for part := range strings.SplitSeq(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || strings.TrimPrefix(part, "W/") == etag {
			return true
		}
	}
	return false
}

// validID reports whether id is a content id: 64 lowercase hex digits.
func validID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

//go:embed embed.js
var embedJS []byte

func serveEmbedJS(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(embedJS)
}

// Package jobsapi serves the generic-jobs API under /v1 (docs/api.md):
// queues, key limits, jobs, workflows, agents, stats and tokens, over the
// engine of internal/jobs. Every request needs a bearer token whose role
// allows it, but that of the OpenAPI document (GET /v1/openapi.json,
// openapi.json); every error is JSON naming the field at fault.
package jobsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/tokens"
)

// Config configures the API.
type Config struct {
	Engine *jobs.Engine
	Tokens *tokens.Store
	// MaxBody caps a request body (default 32 MiB).
	MaxBody int64
	Logger  *slog.Logger
	// Tracer, when set, records the server's spans of jobs (enqueue,
	// lease, complete) in the traces the jobs carry (docs/operations.md,
	// "Tracing"); nil records none.
	Tracer trace.Tracer
}

// api is the handler set.
type api struct {
	Config
}

// permission is what a route needs.
type permission uint8

const (
	permRead   permission = iota // read queues, limits, jobs, stats
	permSubmit                   // enqueue, cancel, retry
	permWork                     // lease, renew, complete, leave
	permAdmin                    // queues, limits, tokens
	permPublic                   // no token: the OpenAPI document
)

var permNames = map[permission]string{permRead: "read", permSubmit: "submit jobs", permWork: "take work as an agent", permAdmin: "administer"}

func (r permission) allowedTo(role tokens.Role) bool {
	switch role {
	case tokens.Admin:
		return true
	case tokens.Client:
		return r == permRead || r == permSubmit
	case tokens.Agent:
		return r == permRead || r == permWork
	}
	return false
}

// route is one endpoint of /v1: its pattern, what it needs, its handler.
type route struct {
	pattern string
	perm    permission
	h       func(w http.ResponseWriter, r *http.Request) error
}

// routes is the table of /v1. Every route has an operation in the
// OpenAPI document (openapi.json), and openapi_test.go fails when they
// part.
func (a *api) routes() []route {
	return []route{
		{"POST /v1/queues", permAdmin, a.createQueue},
		{"GET /v1/queues", permRead, a.listQueues},
		{"GET /v1/queues/{name}", permRead, a.getQueue},
		{"PATCH /v1/queues/{name}", permAdmin, a.updateQueue},
		{"DELETE /v1/queues/{name}", permAdmin, a.deleteQueue},
		{"POST /v1/queues/{name}/flush", permAdmin, a.flushQueue},
		{"POST /v1/queues/{name}/targets", permSubmit, a.enqueueTargets},
		{"PUT /v1/limits", permAdmin, a.setLimit},
		{"GET /v1/limits", permRead, a.listLimits},
		{"POST /v1/jobs", permSubmit, a.enqueue},
		{"GET /v1/jobs", permRead, a.listJobs},
		{"GET /v1/jobs/{id}", permRead, a.getJob},
		{"DELETE /v1/jobs/{id}", permSubmit, a.deleteJob},
		{"POST /v1/jobs/actions", permSubmit, a.actOnJobs},
		{"POST /v1/jobs/{id}/cancel", permSubmit, a.cancelJob},
		{"POST /v1/jobs/{id}/retry", permSubmit, a.retryJob},
		{"POST /v1/jobs/{id}/run", permSubmit, a.runJobNow},
		{"POST /v1/workflows", permSubmit, a.submitWorkflow},
		{"GET /v1/workflows/{id}", permRead, a.getWorkflow},
		{"POST /v1/agent/lease", permWork, a.lease},
		{"POST /v1/agent/renew", permWork, a.renew},
		{"POST /v1/agent/complete", permWork, a.complete},
		{"POST /v1/agent/started", permWork, a.started},
		{"POST /v1/agent/leave", permWork, a.leave},
		{"POST /v1/agent/progress", permWork, a.progress},
		{"GET /v1/stats", permRead, a.stats},
		{"POST /v1/tokens", permAdmin, a.createToken},
		{"GET /v1/tokens", permAdmin, a.listTokens},
		{"GET /v1/whoami", permRead, a.whoami},
		{"DELETE /v1/tokens/{id}", permAdmin, a.deleteToken},
		{"POST /v1/cron", permAdmin, a.createCron},
		{"GET /v1/cron", permRead, a.listCrons},
		{"GET /v1/cron/{name}", permRead, a.getCron},
		{"PATCH /v1/cron/{name}", permAdmin, a.updateCron},
		{"DELETE /v1/cron/{name}", permAdmin, a.deleteCron},
		{"GET /v1/openapi.json", permPublic, a.openAPI},
	}
}

// Handler returns the /v1 routes.
func Handler(cfg Config) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 32 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &api{Config: cfg}
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		mux.Handle(rt.pattern, a.guard(rt.perm, rt.h))
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s (see docs/api.md)", r.Method, r.URL.Path), nil)
	})
	return mux
}

type tokenKey struct{}

// guard checks the token and its role, then runs h and turns its error
// into a JSON answer.
func (a *api) guard(perm permission, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if perm == permPublic {
			if err := h(w, r); err != nil {
				a.fail(w, r, err)
			}
			return
		}
		secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tok, err := a.Tokens.Lookup(r.Context(), strings.TrimSpace(secret))
		if !ok || errors.Is(err, tokens.ErrNotFound) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="usher"`)
			writeError(w, http.StatusUnauthorized, "missing or unknown token", nil)
			return
		}
		if err != nil {
			a.tokenStoreFailed(w, r, err)
			return
		}
		if !perm.allowedTo(tok.Role) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("role %s may not %s (%s %s)", tok.Role, permNames[perm], r.Method, r.URL.Path), nil)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.MaxBody)
		if err := h(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok))); err != nil {
			a.fail(w, r, err)
		}
	})
}

// tokenStoreFailed answers a request whose token could not be checked
// (the token store, Redis in multi-node mode, is down or restarting): 503
// with Retry-After, logged as a warning, since the client retries and the
// store comes back on its own.
func (a *api) tokenStoreFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client left; nobody reads an answer
	}
	a.Logger.Warn("jobsapi: cannot check the token; answering 503", "method", r.Method, "path", r.URL.Path, "err", err)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "the token store cannot be reached: "+err.Error(), nil)
}

// fail answers an error with the status its kind maps to.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *jobs.FieldError
	var tooBig *http.MaxBytesError
	errors.As(err, &fe)
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over the limit of %d bytes", tooBig.Limit), nil)
	case errors.Is(err, jobs.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error(), fe)
	case errors.Is(err, jobs.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error(), fe)
	case errors.Is(err, jobs.ErrConflict):
		writeError(w, http.StatusConflict, err.Error(), fe)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client left; nobody reads an answer.
	default:
		a.Logger.Error("jobsapi: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the server could not complete the request: "+err.Error(), nil)
	}
}

func writeError(w http.ResponseWriter, status int, msg string, fe *jobs.FieldError) {
	body := map[string]any{"error": msg}
	if fe != nil && fe.Cycle != nil {
		body["cycle"] = fe.Cycle
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body into v, strictly: one value, no unknown fields.
func decode(r *http.Request, v any) error {
	_, err := decodeRaw(r, v)
	return err
}

// decodeRaw is decode that also returns the body, read once: a time field
// that does not parse is named from it, and the enqueue checks read it.
func decodeRaw(r *http.Request, v any) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, bodyError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if terr, ok := timeError(err, raw); ok {
			return nil, terr
		}
		return nil, bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &jobs.FieldError{Msg: "body holds more than one JSON value", Kind: jobs.ErrInvalid}
	}
	return raw, nil
}

// bodyError turns a decoding error into one that names the field.
func bodyError(err error) error {
	var (
		typeErr *json.UnmarshalTypeError
		synErr  *json.SyntaxError
		tooBig  *http.MaxBytesError
	)
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return &jobs.FieldError{Field: field, Msg: fmt.Sprintf("expected %s, got JSON %s", typeErr.Type, typeErr.Value), Kind: jobs.ErrInvalid}
	case errors.As(err, &synErr):
		return &jobs.FieldError{Msg: fmt.Sprintf("malformed JSON at byte %d: %v", synErr.Offset, err), Kind: jobs.ErrInvalid}
	case errors.Is(err, io.EOF):
		return &jobs.FieldError{Msg: "empty body; expected a JSON object", Kind: jobs.ErrInvalid}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return &jobs.FieldError{Field: strings.Trim(name, `"`), Msg: "unknown field", Kind: jobs.ErrInvalid}
	}
	return &jobs.FieldError{Msg: "malformed JSON: " + err.Error(), Kind: jobs.ErrInvalid}
}

// Package jobsapitest runs the real /v1 API for tests: the engine on a
// SQLite file in a temporary directory (or on any store), behind a
// loopback HTTP server.
package jobsapitest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/internal/tokens"
)

// Server is a running /v1 API.
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:port).
	URL string
	// AdminToken is a token with the admin role.
	AdminToken string
	// Engine is the engine behind the API, for checks of its invariants.
	Engine *jobs.Engine
	// Tokens is the token store, to make tokens of other roles.
	Tokens *tokens.Store
	// DataPath is the SQLite file (empty for StartOn).
	DataPath string
}

// Options changes the engine's configuration; nil fields keep defaults.
type Options struct {
	Tiers    []sched.Tier
	LeaseTTL time.Duration
	Logger   *slog.Logger
	// Tracer records the server's spans of jobs (nil: none).
	Tracer trace.Tracer
}

// Start runs a server on a fresh SQLite file; t.Cleanup stops it.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	return StartAt(t, filepath.Join(t.TempDir(), "usher.db"), o)
}

// StartAt runs a server on the SQLite file at path (a restart when the
// file holds state).
func StartAt(t testing.TB, path string, o Options) *Server {
	t.Helper()
	s, stop, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Open runs a server on the SQLite file at path, for callers without a
// testing.TB (runnable examples); stop ends the server and closes the
// file.
func Open(path string, o Options) (s *Server, stop func() error, err error) {
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	store, err := sqlitejobs.Open(ctx, db, o.Logger)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("opening the jobs store: %w", err)
	}
	toks, err := tokens.Open(ctx, db)
	if err != nil {
		store.Close()
		db.Close()
		return nil, nil, fmt.Errorf("opening the token store: %w", err)
	}
	s, stopServer, err := serve(store, toks, o)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	s.DataPath = path
	return s, func() error {
		stopServer()
		return db.Close()
	}, nil
}

// StartOn runs a server on any store (a restart when it holds state) with
// the given tokens, to which it adds an admin token; t.Cleanup stops the
// server and closes the store.
func StartOn(t testing.TB, store jobs.Store, toks *tokens.Store, o Options) *Server {
	t.Helper()
	s, stop, err := serve(store, toks, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// serve runs the engine on store and the API in front of it; stop ends
// both and closes the store (which serve also closes when it fails).
func serve(store jobs.Store, toks *tokens.Store, o Options) (s *Server, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	engine, err := jobs.Open(ctx, jobs.Config{Store: store, Tiers: o.Tiers, LeaseTTL: o.LeaseTTL, Logger: o.Logger})
	if err != nil {
		cancel()
		store.Close()
		return nil, nil, fmt.Errorf("starting the engine: %w", err)
	}
	const admin = "usher_test-admin-token-0123456789"
	if _, err := toks.Add(ctx, admin, "test admin", tokens.Admin); err != nil {
		cancel()
		store.Close()
		return nil, nil, fmt.Errorf("adding the admin token: %w", err)
	}
	go engine.Run(ctx)
	hs := httptest.NewServer(jobsapi.Handler(jobsapi.Config{Engine: engine, Tokens: toks, Logger: o.Logger, Tracer: o.Tracer}))
	stop = func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		store.Close()
	}
	return &Server{URL: hs.URL, AdminToken: admin, Engine: engine, Tokens: toks}, stop, nil
}

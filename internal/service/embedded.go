package service

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/shares"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/internal/tokens"
)

// embedded is the embedded default: the dispatcher owns the scheduling
// core and runs tasks on local sandboxed backends and remote `usher
// backend`s; the generic jobs of /v1 and their tokens live in the SQLite
// file.
type embedded struct {
	cfg      Config
	d        *asyqueue.Dispatcher
	runner   *sandbox.Runner // nil without local backends
	jobs     *jobs.Engine
	jobStore *sqlitejobs.Store
	jobsAPI  http.Handler
	toks     *tokens.Store
	history  *dashboard.Recorder
	jobsObs  *jobsapi.Observer // the generic jobs' wait and run times and outcomes
}

// openEmbedded builds the embedded default on the open data file and
// registers the generic jobs' metrics.
func openEmbedded(ctx context.Context, cfg Config, db *sql.DB, reg prometheus.Registerer) (_ *embedded, err error) {
	m := &embedded{cfg: cfg}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	if cfg.LocalBackends > 0 {
		scfg := cfg.Sandbox
		if scfg.SpareDisplays == 0 {
			scfg.SpareDisplays = cfg.LocalBackends // one per task that may run at once
		}
		if m.runner, err = sandbox.New(scfg); err != nil {
			return nil, err
		}
	}
	dcfg := cfg.Dispatcher
	dcfg.Tiers, dcfg.Caps = cfg.tiers(), cfg.Caps
	if m.d, err = asyqueue.NewDispatcher(dcfg); err != nil {
		return nil, err
	}
	m.history = dashboard.NewRecorder(dcfg.Now)
	if err := m.openJobs(ctx, db); err != nil {
		return nil, err
	}
	reg.MustRegister(jobsapi.NewCollector(m.jobs), m.jobsObs)
	return m, nil
}

// openJobs opens the generic jobs of /v1: their store in the data file,
// the engine rebuilt from it, and the API tokens.
func (m *embedded) openJobs(ctx context.Context, db *sql.DB) error {
	var err error
	if m.jobStore, err = sqlitejobs.Open(ctx, db, m.cfg.Logger); err != nil {
		return err
	}
	jc := m.cfg.Jobs
	m.jobsObs = jobsapi.NewObserver()
	m.jobs, err = jobs.Open(ctx, jobs.Config{Store: m.jobStore, Tiers: jc.Tiers, LeaseTTL: jc.LeaseTTL, KeyRetention: jc.KeyRetention, Logger: m.cfg.Logger,
		Observer: m.jobsObs})
	if err != nil {
		return err
	}
	if m.toks, err = tokens.Open(ctx, db); err != nil {
		return err
	}
	if err := m.ensureAdminToken(ctx, m.toks); err != nil {
		return err
	}
	m.jobsAPI = jobsapi.Handler(jobsapi.Config{Engine: m.jobs, Tokens: m.toks, MaxBody: jc.MaxBody, Logger: m.cfg.Logger,
		Tracer: jc.Tracer})
	return nil
}

// ensureAdminToken makes the configured admin token known, or, when no
// admin token exists, creates one and writes it to the token file.
func (m *embedded) ensureAdminToken(ctx context.Context, toks *tokens.Store) error {
	jc := m.cfg.Jobs
	if jc.AdminToken != "" {
		_, err := toks.Add(ctx, jc.AdminToken, "admin (from the command line)", tokens.Admin)
		return err
	}
	if n, err := toks.Count(ctx, tokens.Admin); err != nil || n > 0 {
		return err
	}
	path := jc.AdminTokenFile
	if path == "" {
		path = filepath.Join(filepath.Dir(m.cfg.DataPath), "usher-admin.token")
	}
	_, secret, err := toks.Create(ctx, "admin (first start)", tokens.Admin)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("serve: writing the admin token: %w", err)
	}
	m.cfg.Logger.Info("created an admin token for /v1", "file", path)
	return nil
}

func (m *embedded) stores(ctx context.Context, db *sql.DB, cfg Config, shareCfg shares.Config) (stores, error) {
	return openLocalStores(ctx, db, cfg, shareCfg)
}

func (m *embedded) queue() asyqueue.Queue           { return m.d }
func (m *embedded) snapshots() *asyqueue.Dispatcher { return m.d }
func (m *embedded) v1() http.Handler                { return m.jobsAPI }
func (m *embedded) drain()                          { m.jobs.Drain() }
func (m *embedded) tokens() *tokens.Store           { return m.toks }
func (m *embedded) tally() *dashboard.Tally         { return m.history.Tally }

func (m *embedded) dashboard(context.Context) (dashboard.Dashboard, error) {
	st, err := m.d.Dashboard()
	if err != nil {
		return dashboard.Dashboard{}, err
	}
	return dashboard.Dashboard{State: st, Jobs: m.jobs.Stats(), History: m.history.History()}, nil
}

// start runs the dispatcher and the jobs engine, and registers the
// backends.
func (m *embedded) start(ctx context.Context) error {
	go m.d.Run(ctx)
	go m.jobs.Run(ctx)
	go m.recordHistory(ctx)
	if m.cfg.Jobs.Retention > 0 {
		go m.jobStore.Prune(ctx, m.cfg.Jobs.Retention, time.Hour)
	}
	for i := range m.cfg.LocalBackends {
		if err := m.d.AddBackend(fmt.Sprintf("local-%d", i+1), backend.Sandbox(m.runner)); err != nil {
			return err
		}
	}
	for _, url := range m.cfg.RemoteBackends {
		go watchRemote(ctx, m.d, url, m.cfg.Logger)
	}
	return nil
}

func (m *embedded) close() {
	if m.runner != nil {
		_ = m.runner.Close() // kills the spare displays, removes the shader cache template; the tasks were cancelled before
	}
	if m.jobStore != nil {
		m.jobStore.Close()
	}
}

package service

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/internal/tokens"
)

// openJobs opens the generic jobs of /v1: their store in the data file,
// the engine rebuilt from it, and the API tokens.
func (s *Service) openJobs(ctx context.Context) error {
	var err error
	if s.jobStore, err = sqlitejobs.Open(ctx, s.db, s.cfg.Logger); err != nil {
		return err
	}
	jc := s.cfg.Jobs
	s.jobs, err = jobs.Open(ctx, jobs.Config{Store: s.jobStore, Tiers: jc.Tiers, LeaseTTL: jc.LeaseTTL, Logger: s.cfg.Logger})
	if err != nil {
		return err
	}
	if s.tokens, err = tokens.Open(ctx, s.db); err != nil {
		return err
	}
	if err := s.ensureAdminToken(ctx); err != nil {
		return err
	}
	s.jobsAPI = jobsapi.Handler(jobsapi.Config{Engine: s.jobs, Tokens: s.tokens, MaxBody: jc.MaxBody, Logger: s.cfg.Logger})
	return nil
}

// ensureAdminToken makes the configured admin token known, or, when no
// admin token exists, creates one and writes it to the token file.
func (s *Service) ensureAdminToken(ctx context.Context) error {
	jc := s.cfg.Jobs
	if jc.AdminToken != "" {
		_, err := s.tokens.Add(ctx, jc.AdminToken, "admin (from the command line)", tokens.Admin)
		return err
	}
	if n, err := s.tokens.Count(ctx, tokens.Admin); err != nil || n > 0 {
		return err
	}
	path := jc.AdminTokenFile
	if path == "" {
		path = filepath.Join(filepath.Dir(s.cfg.DataPath), "usher-admin.token")
	}
	_, secret, err := s.tokens.Create(ctx, "admin (first start)", tokens.Admin)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("serve: writing the admin token: %w", err)
	}
	s.cfg.Logger.Info("created an admin token for /v1", "file", path)
	return nil
}

// Package sqlitejobs keeps the generic jobs of internal/jobs in usher's
// SQLite file: queues, key limits, workflows, and every job with its
// payload, state, attempts and last result.
//
// One goroutine writes. Changes appended while it commits wait in the next
// batch, so that one transaction carries the changes of many concurrent
// requests (group commit) and the writes keep the order of the appends.
// The file runs in WAL mode with synchronous=NORMAL: a committed change
// survives the process being killed; a power cut may lose the last few
// transactions.
package sqlitejobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/jobtype"
)

var schema = []string{`
CREATE TABLE job_queues (name TEXT PRIMARY KEY, spec TEXT NOT NULL);
CREATE TABLE job_limits (pattern TEXT PRIMARY KEY, lim INTEGER NOT NULL);
CREATE TABLE job_workflows (id INTEGER PRIMARY KEY, name TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE jobs (
	id INTEGER PRIMARY KEY,
	queue TEXT NOT NULL,
	state INTEGER NOT NULL,
	spec TEXT NOT NULL,
	payload BLOB,
	workflow INTEGER,
	attempt INTEGER NOT NULL DEFAULT 0,
	agent TEXT,
	ready_at INTEGER,
	created_at INTEGER NOT NULL,
	started_at INTEGER,
	finished_at INTEGER,
	exit_code INTEGER,
	output TEXT,
	error TEXT
);
CREATE INDEX jobs_unfinished ON jobs(id) WHERE state < 2;
CREATE INDEX jobs_by_workflow ON jobs(workflow, id) WHERE workflow IS NOT NULL;
CREATE TABLE job_deps (job INTEGER NOT NULL, dep INTEGER NOT NULL, PRIMARY KEY (job, dep)) WITHOUT ROWID;
`, `
-- The next job and workflow ids, as a prune leaves them: a pruned id is
-- never handed out again, even when it was the newest.
CREATE TABLE job_next_ids (kind TEXT PRIMARY KEY, next INTEGER NOT NULL) WITHOUT ROWID;
`, `
-- Periodic jobs: name → the entry's record as JSON (jobs.CronRecord), its
-- lastAt written in the transaction that inserts that tick's job.
CREATE TABLE job_crons (name TEXT PRIMARY KEY, rec TEXT NOT NULL) WITHOUT ROWID;
-- Idempotency keys: written with the job that brought them, deleted by
-- the engine's OpPruneKeys once older than the key retention.
CREATE TABLE job_idempotency_keys (key TEXT PRIMARY KEY, job INTEGER NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX job_idempotency_keys_by_time ON job_idempotency_keys(created_at);
-- What a handler reports beside its outcome: the latest progress (JSON
-- {"value","message"}) and its JSON result.
ALTER TABLE jobs ADD COLUMN progress TEXT;
ALTER TABLE jobs ADD COLUMN result BLOB;
-- Key rates: "100/s", "6000/m" or "10/h" ('' for none) and the burst.
ALTER TABLE job_limits ADD COLUMN rate TEXT NOT NULL DEFAULT '';
ALTER TABLE job_limits ADD COLUMN burst INTEGER NOT NULL DEFAULT 0;
`, `
-- Idempotency keys of enqueue requests: the request's job ids in order,
-- as runs "first+count" joined by commas (jobs.FormatRuns).
CREATE TABLE job_request_keys (key TEXT PRIMARY KEY, jobs TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX job_request_keys_by_time ON job_request_keys(created_at);
`, `
-- What a listing finds jobs by (list.go): their tags and keys, one row
-- each, gone with the job's row; a queue's jobs, and the failed and
-- cancelled ones (by queue too), in id order. The unfinished ones have
-- jobs_unfinished. A job's start and success change no index of these
-- but that one: they are every job's path.
CREATE TABLE job_tags (tag TEXT NOT NULL, job INTEGER NOT NULL, PRIMARY KEY (tag, job)) WITHOUT ROWID;
CREATE INDEX job_tags_by_job ON job_tags(job);
CREATE TABLE job_keys (key TEXT NOT NULL, job INTEGER NOT NULL, PRIMARY KEY (key, job)) WITHOUT ROWID;
CREATE INDEX job_keys_by_job ON job_keys(job);
INSERT OR IGNORE INTO job_keys (key, job) SELECT k.value, jobs.id FROM jobs, json_each(jobs.spec, '$.keys') AS k;
CREATE TRIGGER jobs_labels_gone AFTER DELETE ON jobs BEGIN
	DELETE FROM job_tags WHERE job = old.id;
	DELETE FROM job_keys WHERE job = old.id;
END;
CREATE INDEX jobs_by_queue ON jobs(queue, id);
CREATE INDEX jobs_failed_or_cancelled ON jobs(state, id) WHERE state >= 3;
CREATE INDEX jobs_failed_or_cancelled_by_queue ON jobs(queue, state, id) WHERE state >= 3;
`, `
-- A job's attempts that ended without success, written as each ends
-- (attempts.go); gone with the job's row.
CREATE TABLE job_attempts (
	job INTEGER NOT NULL,
	attempt INTEGER NOT NULL,
	agent TEXT NOT NULL,
	started_at INTEGER,
	ended_at INTEGER NOT NULL,
	exit_code INTEGER,
	error TEXT NOT NULL,
	output TEXT NOT NULL
);
CREATE INDEX job_attempts_by_job ON job_attempts(job);
CREATE TRIGGER jobs_attempts_gone AFTER DELETE ON jobs BEGIN
	DELETE FROM job_attempts WHERE job = old.id;
END;
`}

// States as stored: unfinished jobs are 0 (waiting, delayed or queued:
// the engine tells them apart) or 1 (running).
const (
	stQueued = iota
	stRunning
	stSucceeded
	stFailed
	stCancelled
)

var stateNames = []jobtype.State{jobtype.StateQueued, jobtype.StateRunning, jobtype.StateSucceeded, jobtype.StateFailed, jobtype.StateCancelled}

func stateCode(s jobtype.State) int {
	for i, n := range stateNames {
		if n == s {
			return i
		}
	}
	return -1
}

// Store is the SQLite jobs.Store.
type Store struct {
	*jobs.GroupCommitter // Append, Close and Prune
	db                   *sql.DB
	log                  *slog.Logger
}

// Open prepares the tables in db and starts the writer.
func Open(ctx context.Context, db *sql.DB, log *slog.Logger) (*Store, error) {
	if err := sqlitedb.Migrate(ctx, db, "jobs", schema); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	w, err := newWriter(ctx, db)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, log: log}
	s.GroupCommitter = jobs.NewGroupCommitter("sqlitejobs", w.commit, nil, w.close, log)
	return s, nil
}

// nextIDQuery gives the next id of a kind ("jobs" or "workflows"): one
// past the largest there is or, when a prune deleted the largest, was.
const nextIDQuery = `SELECT max(
	coalesce((SELECT next FROM job_next_ids WHERE kind = ?1), 1),
	coalesce((SELECT max(id) FROM jobs WHERE ?1 = 'jobs'), 0) + 1,
	coalesce((SELECT max(id) FROM job_workflows WHERE ?1 = 'workflows'), 0) + 1)`

// Load implements jobs.Store.
func (s *Store) Load(ctx context.Context) (*jobs.Snapshot, error) {
	snap := &jobs.Snapshot{}
	if err := s.loadQueues(ctx, snap); err != nil {
		return nil, err
	}
	if err := s.loadJobs(ctx, snap); err != nil {
		return nil, err
	}
	if err := s.loadCrons(ctx, snap); err != nil {
		return nil, err
	}
	if err := s.loadKeys(ctx, snap); err != nil {
		return nil, err
	}
	err := s.db.QueryRowContext(ctx, nextIDQuery, "jobs").Scan(&snap.NextJob)
	if err == nil {
		err = s.db.QueryRowContext(ctx, nextIDQuery, "workflows").Scan(&snap.NextWorkflow)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitejobs: load ids: %w", err)
	}
	return snap, nil
}

func (s *Store) loadQueues(ctx context.Context, snap *jobs.Snapshot) error {
	rows, err := s.db.QueryContext(ctx, `SELECT spec FROM job_queues ORDER BY name`)
	if err != nil {
		return fmt.Errorf("sqlitejobs: load queues: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var spec []byte
		var q jobtype.Queue
		if err := rows.Scan(&spec); err != nil {
			return fmt.Errorf("sqlitejobs: load queues: %w", err)
		}
		if err := json.Unmarshal(spec, &q); err != nil {
			return fmt.Errorf("sqlitejobs: load queues: %w", err)
		}
		snap.Queues = append(snap.Queues, q)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlitejobs: load queues: %w", err)
	}
	lrows, err := s.db.QueryContext(ctx, `SELECT pattern, lim, rate, burst FROM job_limits ORDER BY pattern`)
	if err != nil {
		return fmt.Errorf("sqlitejobs: load limits: %w", err)
	}
	defer lrows.Close()
	for lrows.Next() {
		var l jobtype.KeyLimit
		if err := lrows.Scan(&l.Pattern, &l.Limit, &l.Rate, &l.Burst); err != nil {
			return fmt.Errorf("sqlitejobs: load limits: %w", err)
		}
		snap.Limits = append(snap.Limits, l)
	}
	return lrows.Err()
}

func (s *Store) loadJobs(ctx context.Context, snap *jobs.Snapshot) error {
	rows, err := s.db.QueryContext(ctx, `SELECT id, state, spec, payload, coalesce(workflow, 0), attempt, created_at,
		coalesce(ready_at, 0) FROM jobs WHERE state < 2 ORDER BY id`)
	if err != nil {
		return fmt.Errorf("sqlitejobs: load jobs: %w", err)
	}
	defer rows.Close()
	index := map[int64]int{}
	for rows.Next() {
		var r jobs.Record
		var state int
		var spec, payload []byte
		var created, readyAt int64
		if err := rows.Scan(&r.ID, &state, &spec, &payload, &r.Workflow, &r.Attempt, &created, &readyAt); err != nil {
			return fmt.Errorf("sqlitejobs: load jobs: %w", err)
		}
		if err := json.Unmarshal(spec, &r.Spec); err != nil {
			return fmt.Errorf("sqlitejobs: load job %d: %w", r.ID, err)
		}
		r.Spec.Payload, r.Spec.After = payload, nil
		r.Running, r.CreatedAt = state == stRunning, time.UnixMilli(created)
		if readyAt > 0 && !r.Running {
			r.ReadyAt = time.UnixMilli(readyAt)
		}
		index[r.ID] = len(snap.Jobs)
		snap.Jobs = append(snap.Jobs, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlitejobs: load jobs: %w", err)
	}
	return s.loadDeps(ctx, snap, index)
}

// loadDeps gives each unfinished job its unfinished dependencies.
func (s *Store) loadDeps(ctx context.Context, snap *jobs.Snapshot, index map[int64]int) error {
	rows, err := s.db.QueryContext(ctx, `SELECT d.job, d.dep FROM job_deps d JOIN jobs j ON j.id = d.dep
		WHERE j.state < 2 ORDER BY d.job, d.dep`)
	if err != nil {
		return fmt.Errorf("sqlitejobs: load dependencies: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var job, dep int64
		if err := rows.Scan(&job, &dep); err != nil {
			return fmt.Errorf("sqlitejobs: load dependencies: %w", err)
		}
		if i, ok := index[job]; ok {
			snap.Jobs[i].After = append(snap.Jobs[i].After, dep)
		}
	}
	return rows.Err()
}

const jobColumns = `id, queue, state, spec, payload, coalesce(workflow, 0), attempt, coalesce(agent, ''),
	created_at, started_at, finished_at, exit_code, coalesce(output, ''), coalesce(error, ''), progress, result`

// Job implements jobs.Store.
func (s *Store) Job(ctx context.Context, id int64) (jobtype.Job, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id)
	j, err := scanJob(row)
	if errors.Is(err, sql.ErrNoRows) {
		return jobtype.Job{}, &jobs.FieldError{Msg: fmt.Sprintf("no job %d", id), Kind: jobs.ErrNotFound}
	}
	if err != nil {
		return j, err
	}
	j.Attempts, err = s.attempts(ctx, id)
	return j, err
}

type scanner interface{ Scan(...any) error }

func scanJob(r scanner) (jobtype.Job, error) {
	var (
		j                         jobtype.Job
		id, wf, created           int64
		state                     int
		spec, payload             []byte
		started, finished, exitCo sql.NullInt64
		progress, result          []byte
	)
	err := r.Scan(&id, &j.Queue, &state, &spec, &payload, &wf, &j.Attempt, &j.Agent,
		&created, &started, &finished, &exitCo, &j.Output, &j.Error, &progress, &result)
	if err != nil {
		return jobtype.Job{}, err
	}
	if len(progress) > 0 {
		j.Progress = &jobtype.Progress{}
		if err := json.Unmarshal(progress, j.Progress); err != nil {
			return jobtype.Job{}, fmt.Errorf("sqlitejobs: job %d: progress: %w", id, err)
		}
	}
	if len(result) > 0 {
		j.Result = json.RawMessage(result)
	}
	if err := json.Unmarshal(spec, &j.JobSpec); err != nil {
		return jobtype.Job{}, fmt.Errorf("sqlitejobs: job %d: %w", id, err)
	}
	j.ID, j.Payload, j.State = fmt.Sprint(id), payload, stateNames[state]
	if wf != 0 {
		j.Workflow = fmt.Sprint(wf)
	}
	j.CreatedAt = time.UnixMilli(created).UTC()
	j.StartedAt, j.FinishedAt = optTime(started), optTime(finished)
	if exitCo.Valid {
		c := int(exitCo.Int64)
		j.ExitCode = &c
	}
	return j, nil
}

func optTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := time.UnixMilli(n.Int64).UTC()
	return &t
}

// WorkflowInfo implements jobs.Store.
func (s *Store) WorkflowInfo(ctx context.Context, id int64) (string, error) {
	var name string
	err := s.db.QueryRowContext(ctx, `SELECT name FROM job_workflows WHERE id = ?`, id).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", &jobs.FieldError{Msg: fmt.Sprintf("no workflow %d", id), Kind: jobs.ErrNotFound}
	}
	if err != nil {
		return "", fmt.Errorf("sqlitejobs: workflow %d: %w", id, err)
	}
	return name, nil
}

// loadCrons reads the periodic jobs, sorted by name.
func (s *Store) loadCrons(ctx context.Context, snap *jobs.Snapshot) error {
	rows, err := s.db.QueryContext(ctx, `SELECT rec FROM job_crons ORDER BY name`)
	if err != nil {
		return fmt.Errorf("sqlitejobs: load periodic jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		var r jobs.CronRecord
		if err := rows.Scan(&b); err != nil {
			return fmt.Errorf("sqlitejobs: load periodic jobs: %w", err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("sqlitejobs: load periodic job: %w", err)
		}
		snap.Crons = append(snap.Crons, r)
	}
	return rows.Err()
}

// loadKeys reads the idempotency keys kept, of jobs and of requests.
func (s *Store) loadKeys(ctx context.Context, snap *jobs.Snapshot) error {
	if err := s.scanKeys(ctx, snap); err != nil {
		return fmt.Errorf("sqlitejobs: load idempotency keys: %w", err)
	}
	return nil
}

// keysQuery lists both kinds of keys, a job's with its job and a
// request's with its jobs' runs.
const keysQuery = `SELECT key, job, '', created_at FROM job_idempotency_keys
	UNION ALL SELECT key, 0, jobs, created_at FROM job_request_keys ORDER BY created_at`

func (s *Store) scanKeys(ctx context.Context, snap *jobs.Snapshot) error {
	rows, err := s.db.QueryContext(ctx, keysQuery)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k jobs.IdemKey
		var runs string
		var at int64
		if err := rows.Scan(&k.Key, &k.Job, &runs, &at); err != nil {
			return err
		}
		if runs != "" {
			if k.Jobs, err = jobs.ParseRuns(runs); err != nil {
				return err
			}
		}
		k.At = time.UnixMilli(at)
		snap.Keys = append(snap.Keys, k)
	}
	return rows.Err()
}

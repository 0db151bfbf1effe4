package sqlitejobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// writer holds the one connection that writes, with its statements
// prepared once.
type writer struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	inTx  map[string]*sql.Stmt // stmts bound to the open transaction
}

// The statements that write a new job's and a new workflow's row; a
// reset after a prune runs them as "reinsert" and "reinsertWorkflow",
// doing nothing when the row is still there.
const (
	insertJob = `INSERT INTO jobs (id, queue, state, spec, payload, workflow, attempt, created_at)
		VALUES (?, ?, 0, ?, ?, nullif(?, 0), 0, ?)`
	insertWorkflow = `INSERT INTO job_workflows (id, name, created_at) VALUES (?, ?, ?)`
)

var statements = map[string]string{
	"putQueue":    `INSERT INTO job_queues (name, spec) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET spec = excluded.spec`,
	"deleteQueue": `DELETE FROM job_queues WHERE name = ?`,
	"putLimit": `INSERT INTO job_limits (pattern, lim, rate, burst) VALUES (?, ?, ?, ?)
		ON CONFLICT (pattern) DO UPDATE SET lim = excluded.lim, rate = excluded.rate, burst = excluded.burst`,
	"deleteLimit":      `DELETE FROM job_limits WHERE pattern = ?`,
	"workflow":         insertWorkflow,
	"insert":           insertJob,
	"reinsert":         insertJob + ` ON CONFLICT (id) DO NOTHING`,
	"reinsertWorkflow": insertWorkflow + ` ON CONFLICT (id) DO NOTHING`,
	"dep":              `INSERT OR IGNORE INTO job_deps (job, dep) VALUES (?, ?)`,
	"tag":              `INSERT OR IGNORE INTO job_tags (tag, job) VALUES (?, ?)`,
	"jobKey":           `INSERT OR IGNORE INTO job_keys (key, job) VALUES (?, ?)`,
	"delete":           `DELETE FROM jobs WHERE id = ? AND state >= 2`,
	"attemptEnded":     attemptEnded,
	"attemptsTrim":     attemptsTrim,
	"deleteDeps":       `DELETE FROM job_deps WHERE job = ?`,
	"start":            `UPDATE jobs SET state = 1, attempt = ?, agent = ?, started_at = ?, ready_at = NULL WHERE id = ?`,
	"requeue": `UPDATE jobs SET state = 0, agent = NULL, ready_at = ?,
		exit_code = coalesce(?, exit_code), output = coalesce(?, output), error = coalesce(?, error),
		result = coalesce(?, result) WHERE id = ?`,
	"finish": `UPDATE jobs SET state = ?, finished_at = ?,
		exit_code = coalesce(?, exit_code), output = coalesce(?, output), error = coalesce(?, error),
		result = coalesce(?, result) WHERE id = ?`,
	"snooze":   `UPDATE jobs SET state = 0, agent = NULL, attempt = ?, ready_at = ? WHERE id = ?`,
	"progress": `UPDATE jobs SET progress = ? WHERE id = ?`,
	"keepNextIDs": `INSERT INTO job_next_ids (kind, next)
		VALUES ('jobs', (SELECT coalesce(max(id), 0) + 1 FROM jobs)), ('workflows', (SELECT coalesce(max(id), 0) + 1 FROM job_workflows))
		ON CONFLICT (kind) DO UPDATE SET next = max(next, excluded.next)`,
	"prune":          `DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE state >= 2 AND finished_at < ? ORDER BY id LIMIT 100000)`,
	"pruneDeps":      `DELETE FROM job_deps WHERE job NOT IN (SELECT id FROM jobs)`,
	"pruneWorkflows": `DELETE FROM job_workflows WHERE created_at < ? AND id NOT IN (SELECT workflow FROM jobs WHERE workflow IS NOT NULL)`,
	"startMany": `UPDATE jobs SET state = 1, attempt = v.value ->> '$[1]', agent = ?, started_at = ?, ready_at = NULL
		FROM json_each(?) AS v WHERE jobs.id = v.value ->> '$[0]'`,
	"succeedMany": `UPDATE jobs SET state = 2, finished_at = ?, exit_code = 0, output = '', error = ''
		WHERE id IN (SELECT value FROM json_each(?))`,
	"key": `INSERT INTO job_idempotency_keys (key, job, created_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET job = excluded.job, created_at = excluded.created_at`,
	"pruneKeys": `DELETE FROM job_idempotency_keys WHERE created_at < ?`,
	"requestKey": `INSERT INTO job_request_keys (key, jobs, created_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET jobs = excluded.jobs, created_at = excluded.created_at`,
	"pruneRequestKeys": `DELETE FROM job_request_keys WHERE created_at < ?`,
	"reset": `UPDATE jobs SET state = 0, attempt = 0, agent = NULL, ready_at = NULL, started_at = NULL,
		finished_at = NULL, exit_code = NULL, output = NULL, error = NULL, progress = NULL, result = NULL WHERE id = ?`,
	"putCron":    `INSERT INTO job_crons (name, rec) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET rec = excluded.rec`,
	"deleteCron": `DELETE FROM job_crons WHERE name = ?`,
}

func newWriter(ctx context.Context, db *sql.DB) (*writer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlitejobs: writer connection: %w", err)
	}
	w := &writer{conn: conn, stmts: map[string]*sql.Stmt{}, inTx: map[string]*sql.Stmt{}}
	for name, q := range statements {
		st, err := conn.PrepareContext(ctx, q)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("sqlitejobs: prepare %s: %w", name, err)
		}
		w.stmts[name] = st
	}
	return w, nil
}

func (w *writer) close() {
	for _, st := range w.stmts {
		st.Close()
	}
	w.conn.Close()
}

// commit writes ops in one transaction.
func (w *writer) commit(ops []jobs.Op) error {
	ctx := context.Background()
	tx, err := w.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitejobs: begin: %w", err)
	}
	defer tx.Rollback()
	defer clear(w.inTx)
	for i := 0; i < len(ops); {
		n, err := w.applyRun(ctx, tx, ops[i:])
		if err != nil {
			return err
		}
		i += n
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitejobs: commit %d changes: %w", len(ops), err)
	}
	return nil
}

func (w *writer) exec(ctx context.Context, tx *sql.Tx, name string, args ...any) error {
	st := w.inTx[name]
	if st == nil {
		st = tx.StmtContext(ctx, w.stmts[name])
		w.inTx[name] = st
	}
	if _, err := st.ExecContext(ctx, args...); err != nil {
		return fmt.Errorf("sqlitejobs: %s: %w", name, err)
	}
	return nil
}

// applyRun writes ops[0], or, when it begins a run of starts of one lease
// answer or of plain successes, the whole run in one statement; it
// returns how many ops it wrote. One statement for a run saves the
// per-statement cost that dominates a busy server's writes.
func (w *writer) applyRun(ctx context.Context, tx *sql.Tx, ops []jobs.Op) (int, error) {
	first := &ops[0]
	n := 1
	switch {
	case first.Kind == jobs.OpStart:
		for n < len(ops) && ops[n].Kind == jobs.OpStart && ops[n].Agent == first.Agent && ops[n].At.Equal(first.At) {
			n++
		}
	case plainSuccess(first):
		for n < len(ops) && plainSuccess(&ops[n]) && ops[n].At.Equal(first.At) {
			n++
		}
	}
	if n < 2 {
		return 1, w.apply(ctx, tx, first)
	}
	ids := make([]any, n)
	for i := range ids {
		if first.Kind == jobs.OpStart {
			ids[i] = [2]any{ops[i].ID, ops[i].Attempt}
		} else {
			ids[i] = ops[i].ID
		}
	}
	list, _ := json.Marshal(ids)
	if first.Kind == jobs.OpStart {
		return n, w.exec(ctx, tx, "startMany", first.Agent, first.At.UnixMilli(), list)
	}
	return n, w.exec(ctx, tx, "succeedMany", first.At.UnixMilli(), list)
}

// plainSuccess says whether op records a success with no output or error.
func plainSuccess(op *jobs.Op) bool {
	return op.Kind == jobs.OpFinish && op.State == jobtype.StateSucceeded && op.Result != nil &&
		op.Result.ExitCode == 0 && op.Result.Output == "" && op.Result.Error == "" && len(op.Result.Value) == 0
}

func (w *writer) apply(ctx context.Context, tx *sql.Tx, op *jobs.Op) error {
	switch op.Kind {
	case jobs.OpPutQueue:
		spec, _ := json.Marshal(op.Queue)
		return w.exec(ctx, tx, "putQueue", op.Queue.Name, spec)
	case jobs.OpDeleteQueue:
		return w.exec(ctx, tx, "deleteQueue", op.Name)
	case jobs.OpPutLimit:
		if op.Limit.Limit == 0 && op.Limit.Rate == "" {
			return w.exec(ctx, tx, "deleteLimit", op.Limit.Pattern)
		}
		return w.exec(ctx, tx, "putLimit", op.Limit.Pattern, op.Limit.Limit, op.Limit.Rate, op.Limit.Burst)
	case jobs.OpWorkflow:
		return w.exec(ctx, tx, "workflow", op.ID, op.Name, op.At.UnixMilli())
	case jobs.OpInsert:
		if err := w.insert(ctx, tx, op.Record); err != nil {
			return err
		}
		if k := op.Record.Spec.IdempotencyKey; k != "" {
			return w.exec(ctx, tx, "key", k, op.Record.ID, op.Record.CreatedAt.UnixMilli())
		}
		return nil
	case jobs.OpKeepKey:
		return w.exec(ctx, tx, "requestKey", op.Key.Key, jobs.FormatRuns(op.Key.Jobs), op.Key.At.UnixMilli())
	case jobs.OpPruneKeys:
		if err := w.exec(ctx, tx, "pruneKeys", op.At.UnixMilli()); err != nil {
			return err
		}
		return w.exec(ctx, tx, "pruneRequestKeys", op.At.UnixMilli())
	case jobs.OpStart:
		return w.exec(ctx, tx, "start", op.Attempt, op.Agent, op.At.UnixMilli(), op.ID)
	case jobs.OpRequeue:
		if op.Result != nil { // nil: an attempt that never reached its agent, which does not count
			if err := w.attemptEnded(ctx, tx, op); err != nil {
				return err
			}
		}
		code, out, msg, val := resultArgs(op.Result)
		return w.exec(ctx, tx, "requeue", op.At.UnixMilli(), code, out, msg, val, op.ID)
	case jobs.OpFinish:
		if op.State != jobtype.StateSucceeded {
			if err := w.attemptEnded(ctx, tx, op); err != nil {
				return err
			}
		}
		code, out, msg, val := resultArgs(op.Result)
		return w.exec(ctx, tx, "finish", stateCode(op.State), op.At.UnixMilli(), code, out, msg, val, op.ID)
	case jobs.OpSnooze:
		return w.exec(ctx, tx, "snooze", op.Attempt, op.At.UnixMilli(), op.ID)
	case jobs.OpProgress:
		pg, err := json.Marshal(op.Progress)
		if err != nil {
			return fmt.Errorf("sqlitejobs: progress of job %d: %w", op.ID, err)
		}
		return w.exec(ctx, tx, "progress", string(pg), op.ID)
	case jobs.OpReset:
		return w.reset(ctx, tx, op)
	case jobs.OpPrune:
		for _, name := range []string{"keepNextIDs", "prune", "pruneDeps", "pruneWorkflows"} {
			var args []any
			if name == "prune" || name == "pruneWorkflows" {
				args = append(args, op.At.UnixMilli())
			}
			if err := w.exec(ctx, tx, name, args...); err != nil {
				return err
			}
		}
		return nil
	case jobs.OpDelete:
		if err := w.exec(ctx, tx, "delete", op.ID); err != nil {
			return err
		}
		return w.exec(ctx, tx, "deleteDeps", op.ID)
	case jobs.OpPutCron, jobs.OpDeleteCron, jobs.OpFireCron:
		return w.cron(ctx, tx, op)
	}
	return fmt.Errorf("sqlitejobs: unknown change kind %d", op.Kind)
}

// reset queues a finished job again. A prune may have deleted the job
// (and its workflow, if it was the last job there) after the engine read
// it: then the record writes both anew.
func (w *writer) reset(ctx context.Context, tx *sql.Tx, op *jobs.Op) error {
	if err := w.exec(ctx, tx, "reset", op.ID); err != nil || op.Record == nil {
		return err
	}
	r := op.Record
	if r.Workflow != 0 {
		if err := w.exec(ctx, tx, "reinsertWorkflow", r.Workflow, op.Name, r.CreatedAt.UnixMilli()); err != nil {
			return err
		}
	}
	return w.insertAs(ctx, tx, "reinsert", r)
}

func (w *writer) insert(ctx context.Context, tx *sql.Tx, r *jobs.Record) error {
	return w.insertAs(ctx, tx, "insert", r)
}

// insertAs writes a job's row with the statement named stmt, and its
// dependencies.
func (w *writer) insertAs(ctx context.Context, tx *sql.Tx, stmt string, r *jobs.Record) error {
	spec := r.Spec
	spec.Payload = nil
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("sqlitejobs: job %d: %w", r.ID, err)
	}
	var payload any
	if len(r.Spec.Payload) > 0 {
		payload = []byte(r.Spec.Payload)
	}
	if err := w.exec(ctx, tx, stmt, r.ID, spec.Queue, b, payload, r.Workflow, r.CreatedAt.UnixMilli()); err != nil {
		return err
	}
	for _, d := range r.After {
		if err := w.exec(ctx, tx, "dep", r.ID, d); err != nil {
			return err
		}
	}
	for _, t := range r.Spec.Tags {
		if err := w.exec(ctx, tx, "tag", t, r.ID); err != nil {
			return err
		}
	}
	for _, k := range r.Spec.Keys {
		if err := w.exec(ctx, tx, "jobKey", k, r.ID); err != nil {
			return err
		}
	}
	return nil
}

// resultArgs are the exit code, output, error and JSON result of a
// result, or NULLs (which keep the stored ones) when there is none; a
// result without a JSON value keeps the stored one.
func resultArgs(r *jobtype.Result) (any, any, any, any) {
	if r == nil {
		return nil, nil, nil, nil
	}
	var val any
	if len(r.Value) > 0 {
		val = []byte(r.Value)
	}
	return r.ExitCode, r.Output, r.Error, val
}

// cron writes a periodic job's entry; a fire inserts the tick's job in
// the same transaction.
func (w *writer) cron(ctx context.Context, tx *sql.Tx, op *jobs.Op) error {
	if op.Kind == jobs.OpDeleteCron {
		return w.exec(ctx, tx, "deleteCron", op.Name)
	}
	if op.Cron == nil || (op.Kind == jobs.OpFireCron && op.Record == nil) {
		return fmt.Errorf("sqlitejobs: periodic-job change %d without its entry or job", op.Kind)
	}
	if op.Kind == jobs.OpFireCron {
		if err := w.insert(ctx, tx, op.Record); err != nil {
			return err
		}
	}
	b, err := json.Marshal(op.Cron)
	if err != nil {
		return fmt.Errorf("sqlitejobs: periodic job %q: %w", op.Cron.Name, err)
	}
	return w.exec(ctx, tx, "putCron", op.Cron.Name, b)
}

package sqlitejobs

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// A job's history keeps each attempt that ended without success: written
// from the job's row (attempt, agent, start) and the attempt's result,
// before the row changes, and only while the job runs, so that a queued
// job's cancel writes nothing. A success writes nothing: it is the job's
// own last attempt, and the fast path of plain successes stays one
// statement. The history keeps the last jobtype.MaxAttemptHistory.
const (
	attemptEnded = `INSERT INTO job_attempts (job, attempt, agent, started_at, ended_at, exit_code, error, output)
		SELECT id, attempt, coalesce(agent, ''), started_at, ?, ?, ?, ? FROM jobs WHERE id = ? AND state = 1`
	attemptsTrim = `DELETE FROM job_attempts WHERE job = ? AND rowid NOT IN
		(SELECT rowid FROM job_attempts WHERE job = ? ORDER BY rowid DESC LIMIT ?)`
)

// attemptEnded writes the history entry of the attempt that op ends.
func (w *writer) attemptEnded(ctx context.Context, tx *sql.Tx, op *jobs.Op) error {
	var code any
	msg, out := "", ""
	if r := op.Result; r != nil {
		code, msg, out = r.ExitCode, r.Error, tail(r.Output, jobtype.MaxAttemptOutput)
	}
	ended := op.At // a finish's time
	if op.Kind == jobs.OpRequeue && !op.Ended.IsZero() {
		ended = op.Ended
	}
	if err := w.exec(ctx, tx, "attemptEnded", ended.UnixMilli(), code, msg, out, op.ID); err != nil {
		return err
	}
	return w.exec(ctx, tx, "attemptsTrim", op.ID, op.ID, jobtype.MaxAttemptHistory)
}

// tail is the last n bytes of s, cut at a rune's start.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && s[i]&0xC0 == 0x80 {
		i++
	}
	return s[i:]
}

// attempts reads a job's history, oldest first.
func (s *Store) attempts(ctx context.Context, id int64) ([]jobtype.Attempt, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT attempt, agent, started_at, ended_at, exit_code, error, output
		FROM job_attempts WHERE job = ? ORDER BY rowid`, id)
	if err != nil {
		return nil, fmt.Errorf("sqlitejobs: job %d: attempts: %w", id, err)
	}
	defer rows.Close()
	var out []jobtype.Attempt
	for rows.Next() {
		var (
			a       jobtype.Attempt
			started sql.NullInt64
			ended   int64
			code    sql.NullInt64
		)
		if err := rows.Scan(&a.Attempt, &a.Agent, &started, &ended, &code, &a.Error, &a.Output); err != nil {
			return nil, fmt.Errorf("sqlitejobs: job %d: attempts: %w", id, err)
		}
		a.StartedAt, a.EndedAt = optTime(started), time.UnixMilli(ended).UTC()
		if code.Valid {
			c := int(code.Int64)
			a.ExitCode = &c
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

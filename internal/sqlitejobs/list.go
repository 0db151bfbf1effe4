package sqlitejobs

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// Jobs implements jobs.Store. One index drives the page (listDriver): at most
// f.ScanLimit() of its ids after the cursor are examined, and the other
// conditions are checked on each. Every value is a bound parameter.
func (s *Store) Jobs(ctx context.Context, f jobs.Filter) (jobs.Page, error) {
	q, ok := listQuery(f)
	if !ok || f.Limit <= 0 {
		return jobs.Page{Jobs: []jobtype.Job{}}, nil
	}
	page, err := s.listPage(ctx, q, f.Limit)
	if err != nil || len(page.Jobs) == f.Limit {
		return page, err
	}
	// A short page: go on from the last id examined, if the scan stopped
	// at its cap rather than at the end of the index.
	var n int
	var last sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT count(*), `+q.edge+`(did) FROM (`+q.driver+`)`, q.driverArgs...).Scan(&n, &last)
	if err != nil {
		return jobs.Page{}, fmt.Errorf("sqlitejobs: list jobs: %w", err)
	}
	if n == f.ScanLimit() && last.Valid {
		page.Next = last.Int64
	}
	return page, nil
}

func (s *Store) listPage(ctx context.Context, q query, limit int) (jobs.Page, error) {
	rows, err := s.db.QueryContext(ctx, q.sql, q.args...)
	if err != nil {
		return jobs.Page{}, fmt.Errorf("sqlitejobs: list jobs: %w", err)
	}
	defer rows.Close()
	page := jobs.Page{Jobs: []jobtype.Job{}}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return jobs.Page{}, err
		}
		page.Jobs = append(page.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return jobs.Page{}, fmt.Errorf("sqlitejobs: list jobs: %w", err)
	}
	if len(page.Jobs) == limit {
		page.Next, _ = strconv.ParseInt(page.Jobs[limit-1].ID, 10, 64)
	}
	return page, nil
}

// query is a listing's SQL: the driver selects the ids examined, sql the
// page's rows among them.
type query struct {
	driver     string
	driverArgs []any
	edge       string // max or min: the last id the driver examined
	sql        string
	args       []any
}

// listQuery builds the listing's SQL; false when no job can match.
func listQuery(f jobs.Filter) (query, bool) {
	cmp, order, edge := ">", "ASC", "max"
	if f.Desc {
		cmp, order, edge = "<", "DESC", "min"
	}
	var (
		conds []string
		args  []any
	)
	where := func(cond string, a ...any) {
		conds = append(conds, cond)
		args = append(args, a...)
	}
	if f.Queue != "" {
		where(`jobs.queue = ?`, f.Queue)
	}
	if f.State != "" {
		c := stateCode(f.State)
		if c < 0 {
			return query{}, false
		}
		where(`jobs.state = ?`, c)
	}
	if f.Workflow != "" {
		n, err := strconv.ParseInt(f.Workflow, 10, 64)
		if err != nil || n <= 0 {
			return query{}, false
		}
		where(`jobs.workflow = ?`, n)
	}
	if f.Tag != "" {
		where(`EXISTS (SELECT 1 FROM job_tags WHERE tag = ? AND job = jobs.id)`, f.Tag)
	}
	if f.Key != "" {
		where(`EXISTS (SELECT 1 FROM job_keys WHERE key = ? AND job = jobs.id)`, f.Key)
	}
	if f.Query != "" {
		// A prefix found by instr, not a LIKE pattern: % and _ in the text
		// are themselves.
		where(`(jobs.id = ? OR EXISTS (SELECT 1 FROM job_tags WHERE job = jobs.id AND instr(tag, ?) = 1))`,
			idOrNone(f.Query), f.Query)
	}
	if !f.From.IsZero() {
		where(`jobs.created_at >= ?`, f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		where(`jobs.created_at < ?`, f.To.UnixMilli())
	}
	driver, dargs := listDriver(f, cmp)
	driver += ` ORDER BY did ` + order + ` LIMIT ?`
	dargs = append(dargs, f.ScanLimit())
	sqlText := `SELECT ` + jobColumns + ` FROM (` + driver + `) AS d JOIN jobs ON jobs.id = d.did`
	if len(conds) > 0 {
		sqlText += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	sqlText += ` ORDER BY d.did ` + order + ` LIMIT ?`
	all := append(append(append([]any{}, dargs...), args...), f.Limit)
	return query{driver: driver, driverArgs: dargs, edge: edge, sql: sqlText, args: all}, true
}

// listDriver picks the narrowest index a filter names (a tag's, a key's,
// a workflow's, the unfinished jobs', the failed or cancelled jobs' by
// queue or all, a queue's): its ids after the cursor, in the listing's
// order. Each partial index's condition is repeated literally, so that
// SQLite sees the index applies.
func listDriver(f jobs.Filter, cmp string) (string, []any) {
	var sqlText string
	var args []any
	code := stateCode(f.State)
	switch {
	case f.Tag != "":
		sqlText, args = `SELECT job AS did FROM job_tags WHERE tag = ?`, []any{f.Tag}
	case f.Key != "":
		sqlText, args = `SELECT job AS did FROM job_keys WHERE key = ?`, []any{f.Key}
	case f.Workflow != "":
		n, _ := strconv.ParseInt(f.Workflow, 10, 64)
		sqlText, args = `SELECT id AS did FROM jobs WHERE workflow = ?`, []any{n}
	case f.State != "" && code < stSucceeded:
		sqlText, args = `SELECT id AS did FROM jobs WHERE state < 2 AND state = ?`, []any{code}
	case f.State != "" && code > stSucceeded && f.Queue != "":
		sqlText, args = `SELECT id AS did FROM jobs WHERE state >= 3 AND queue = ? AND state = ?`, []any{f.Queue, code}
	case f.State != "" && code > stSucceeded:
		sqlText, args = `SELECT id AS did FROM jobs WHERE state >= 3 AND state = ?`, []any{code}
	case f.Queue != "":
		sqlText, args = `SELECT id AS did FROM jobs WHERE queue = ?`, []any{f.Queue}
	default:
		sqlText = `SELECT id AS did FROM jobs WHERE 1`
	}
	if f.After != 0 {
		col := "id"
		if f.Tag != "" || f.Key != "" {
			col = "job"
		}
		sqlText += ` AND ` + col + ` ` + cmp + ` ?`
		args = append(args, f.After)
	}
	return sqlText, args
}

// idOrNone is the id the text query names, or -1 (no job) when it names
// none.
func idOrNone(q string) int64 {
	n, err := strconv.ParseInt(q, 10, 64)
	if err != nil || n <= 0 {
		return -1
	}
	return n
}

package sqlitejobs

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// Each listing is driven by the index made for it, never by a scan of
// every job when the filter names one: SQLite's own plan says which.
func TestListingUsesItsIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "usher.db"))
	for _, tc := range []struct {
		f     jobs.Filter
		index string
	}{
		{jobs.Filter{Tag: "x"}, "job_tags"},
		{jobs.Filter{Key: "k", State: jobtype.StateFailed}, "job_keys"},
		{jobs.Filter{Workflow: "3"}, "jobs_by_workflow"},
		{jobs.Filter{State: jobtype.StateQueued}, "jobs_unfinished"},
		{jobs.Filter{State: jobtype.StateRunning, Queue: "q", Desc: true, After: 9}, "jobs_unfinished"},
		{jobs.Filter{State: jobtype.StateFailed}, "jobs_failed_or_cancelled "},
		{jobs.Filter{State: jobtype.StateCancelled, Queue: "q", After: 5}, "jobs_failed_or_cancelled_by_queue"},
		{jobs.Filter{Queue: "q", Desc: true}, "jobs_by_queue"},
		{jobs.Filter{State: jobtype.StateSucceeded, Queue: "q"}, "jobs_by_queue"},
	} {
		tc.f.Limit = 10
		q, ok := listQuery(tc.f)
		if !ok {
			t.Fatalf("%+v: no query", tc.f)
		}
		rows, err := s.db.Query(`EXPLAIN QUERY PLAN `+q.driver, q.driverArgs...)
		if err != nil {
			t.Fatalf("%+v: %v", tc.f, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if p := strings.Join(plan, "; ") + " "; !strings.Contains(p, tc.index) {
			t.Errorf("%+v: plan %q; want it to use %s", tc.f, p, tc.index)
		}
	}
}

package jobs

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/jobtype"
)

// The engine speaks the /v1 wire types of package jobtype, the one
// definition it shares with the Go client; Filter is its own.

// Filter selects jobs to list. It is the engine's and the stores' query,
// not a wire body: the API reads it from the query string of GET /v1/jobs
// (docs/api.md, "Finding jobs"). Every condition is a value compared with
// the job's, never query syntax.
type Filter struct {
	Queue    string
	State    jobtype.State
	Workflow string
	// Key selects the jobs that hold this key (exactly, not as a pattern).
	Key string
	// Tag selects the jobs that carry this tag.
	Tag string
	// Query selects the job whose id it is, and the jobs carrying a tag
	// that begins with it.
	Query string
	// From and To bound the creation time: From inclusive, To exclusive;
	// the zero time bounds nothing.
	From, To time.Time
	// Desc lists the newest jobs first.
	Desc bool
	// After is the cursor: the listing goes on after this id, in its
	// order (0: from the start).
	After int64
	Limit int
	// Scan caps the jobs a store examines for one page (0: DefaultScan).
	// A page that reaches it before Limit jobs matched ends short, with a
	// cursor to go on from.
	Scan int
}

// DefaultScan is how many jobs one page examines at most: the bound that
// keeps a listing with a rare condition fast at millions of jobs.
const DefaultScan = 10000

// Page is one page of a listing: Next, the cursor of the next page, is 0
// on the last one.
type Page struct {
	Jobs []jobtype.Job
	Next int64
}

// ScanLimit is f.Scan, or DefaultScan when unset; never below Limit.
func (f Filter) ScanLimit() int {
	n := f.Scan
	if n <= 0 {
		n = DefaultScan
	}
	return max(n, f.Limit)
}

// Beyond says whether id comes after the cursor in the listing's order.
func (f Filter) Beyond(id int64) bool {
	if f.After == 0 {
		return true
	}
	if f.Desc {
		return id < f.After
	}
	return id > f.After
}

// MatchesLabels checks the conditions a store may not index: the key,
// the tag, the text query and the creation time, against a job's spec,
// id and creation time.
func (f Filter) MatchesLabels(id int64, sp *jobtype.JobSpec, created time.Time) bool {
	return (f.Key == "" || slices.Contains(sp.Keys, f.Key)) &&
		(f.Tag == "" || slices.Contains(sp.Tags, f.Tag)) &&
		(f.Query == "" || f.Query == strconv.FormatInt(id, 10) ||
			slices.ContainsFunc(sp.Tags, func(t string) bool { return strings.HasPrefix(t, f.Query) })) &&
		(f.From.IsZero() || !created.Before(f.From)) &&
		(f.To.IsZero() || created.Before(f.To))
}

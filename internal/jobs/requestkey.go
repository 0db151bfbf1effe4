package jobs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/usherhq/usher/jobtype"
)

// Request keys (docs/design.md, "Idempotent enqueue and unique jobs"): an
// enqueue request may carry one idempotency key for all of its jobs. The
// key is kept with the request's answer, written as runs of consecutive
// ids (a request's new jobs take consecutive ids), so that a batch of a
// thousand jobs keeps one key rather than a thousand.

// IDRun is N consecutive job ids from First.
type IDRun struct {
	First int64
	N     int
}

// runsOf compresses ids, in order, into runs of consecutive ids; the ids
// are the engine's own (jobID), decimal.
func runsOf(ids []string) []IDRun {
	var runs []IDRun
	for _, s := range ids {
		id, _ := strconv.ParseInt(s, 10, 64)
		if n := len(runs); n > 0 && runs[n-1].First+int64(runs[n-1].N) == id {
			runs[n-1].N++
			continue
		}
		runs = append(runs, IDRun{First: id, N: 1})
	}
	return runs
}

// FormatRuns writes runs as the stores keep them: "first+n" for each,
// joined by commas ("101+1000" for the ids 101 to 1100).
func FormatRuns(runs []IDRun) string {
	var b strings.Builder
	for i, r := range runs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r.First, 10))
		b.WriteByte('+')
		b.WriteString(strconv.Itoa(r.N))
	}
	return b.String()
}

// ParseRuns reads what FormatRuns wrote.
func ParseRuns(s string) ([]IDRun, error) {
	parts := strings.Split(s, ",")
	runs := make([]IDRun, 0, len(parts))
	for _, p := range parts {
		first, n, ok := strings.Cut(p, "+")
		id, err1 := strconv.ParseInt(first, 10, 64)
		count, err2 := strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || id < 1 || count < 1 {
			return nil, fmt.Errorf("jobs: request key's jobs %q: %q is not first+count", s, p)
		}
		runs = append(runs, IDRun{First: id, N: count})
	}
	return runs, nil
}

// runsLen is the number of ids in runs.
func runsLen(runs []IDRun) int {
	n := 0
	for _, r := range runs {
		n += r.N
	}
	return n
}

// RequestKeyField names a request's idempotency key in errors: the API
// takes it from its header.
const RequestKeyField = jobtype.IdempotencyKeyHeader

// checkRequestKey validates a request's idempotency key ("" for none).
func checkRequestKey(key string) error {
	if len(key) > MaxIdempotencyKey {
		return invalid(RequestKeyField, "%d bytes, over the limit of %d", len(key), MaxIdempotencyKey)
	}
	return nil
}

// replayLocked answers a request whose key is kept: the kept answer,
// every job existing, if the request has as many jobs as the first.
func (e *Engine) replayLocked(key string, n int) (jobtype.EnqueueAnswer, bool, error) {
	k, ok := e.dd.requests[key]
	if !ok {
		return jobtype.EnqueueAnswer{}, false, nil
	}
	if kept := runsLen(k.Jobs); kept != n {
		return jobtype.EnqueueAnswer{}, true, conflict(RequestKeyField,
			"%q was used by an earlier request of %d jobs; this one has %d", key, kept, n)
	}
	ans := jobtype.EnqueueAnswer{IDs: make([]string, 0, n), Existing: make([]bool, n)}
	for _, r := range k.Jobs {
		for i := range int64(r.N) {
			ans.IDs = append(ans.IDs, jobID(r.First+i))
		}
	}
	for i := range ans.Existing {
		ans.Existing[i] = true
	}
	return ans, true, nil
}

// keepRequestKeyLocked keeps a request's key with its answer's ids.
func (e *Engine) keepRequestKeyLocked(key string, ids []string, now time.Time) {
	if key == "" {
		return
	}
	k := IdemKey{Key: key, At: now, Jobs: runsOf(ids)}
	e.addKeyLocked(k)
	e.emit(Op{Kind: OpKeepKey, Key: &k})
}

package redisjobs

import "strconv"

// names are every key the store reads and writes, under the deployment's
// key prefix (docs/redis.md, "Generic jobs"): the fields below, and the
// per-job, per-queue and per-workflow keys of the methods after them.
type names struct {
	prefix     string
	unfinished string    // zset: ids of the queued and running jobs, score = id
	states     [5]string // zsets of job ids by state code (1-4: all but queued), score = id
	finished   string    // zset: finished job ids, score = finish time (unix ms)
	queues     string    // hash: queue name → queue JSON
	limits     string    // hash: key pattern → limit
	workflows  string    // hash: workflow id → name
	wfCreated  string    // zset: workflow ids, score = creation time (unix ms)
	next       string    // hash: "job", "workflow" → the next id
	crons      string    // hash: periodic job name → its record JSON (jobs.CronRecord)
	idem       string    // hash: idempotency key → id of the job it created
	idemAt     string    // zset: idempotency keys, score = when kept (unix ms)
	reqs       string    // hash: a request's idempotency key → its job ids as runs (jobs.FormatRuns)
	reqsAt     string    // zset: requests' idempotency keys, score = when kept (unix ms)
	// The indexes of an older layout, which Load converts (convert.go).
	oldIDs, oldQueued string
}

// Stored state codes, as the SQLite store numbers them: unfinished jobs
// are queued (waiting, delayed or queued: the engine tells them apart) or
// running.
const (
	stQueued = iota
	stRunning
	stSucceeded
	stFailed
	stCancelled
)

var stateNames = [5]string{"queued", "running", "succeeded", "failed", "cancelled"}

func newNames(prefix string) names {
	p := prefix + "jobs."
	n := names{prefix: prefix, unfinished: p + "unfinished", finished: p + "finished", queues: p + "queues",
		limits: p + "limits", workflows: p + "workflows", wfCreated: p + "workflows.created", next: p + "next",
		crons: p + "crons",
		idem:  p + "idempotency", idemAt: p + "idempotency.created",
		reqs: p + "request-keys", reqsAt: p + "request-keys.created",
		oldIDs: p + "ids", oldQueued: p + "state:queued"}
	for c := stRunning; c <= stCancelled; c++ {
		n.states[c] = p + "state:" + stateNames[c]
	}
	return n
}

// job is a job's hash.
func (n names) job(id int64) string { return n.jobOf(strconv.FormatInt(id, 10)) }

// jobOf is the hash of the job with a decimal id.
func (n names) jobOf(id string) string { return n.prefix + "job:" + id }

// queue is the zset of the ids of a queue's jobs.
func (n names) queue(name string) string { return n.prefix + "jobs.queue:" + name }

// workflow is the zset of the ids of a workflow's jobs.
func (n names) workflow(id int64) string {
	return n.prefix + "jobs.workflow:" + strconv.FormatInt(id, 10)
}

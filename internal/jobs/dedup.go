package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/usherhq/usher/jobtype"
)

// Idempotency keys and unique jobs (docs/design.md, "Idempotent enqueue
// and unique jobs"): an enqueue that matches a kept key, or an unfinished
// unique job alike, creates nothing and answers the existing job's id.

// MaxIdempotencyKey is the longest idempotency key, in bytes.
const MaxIdempotencyKey = 200

// DefaultKeyRetention is how long an idempotency key is kept after the
// enqueue that brought it, unless Config.KeyRetention says otherwise.
const DefaultKeyRetention = 24 * time.Hour

// keyPruneEvery spaces the store's deletions of expired keys
// (OpPruneKeys): the engine appends one when keys expire in memory, at
// most this often.
const keyPruneEvery = time.Minute

// IdemKey is a kept idempotency key: a job's, with the job it created,
// or an enqueue request's, with the jobs of its answer; and when.
type IdemKey struct {
	Key string
	Job int64 // a job's key: the job
	At  time.Time
	// Jobs are a request key's answer, in order (requestkey.go); nil for
	// a job's key.
	Jobs []IDRun
}

// isRequest tells a request's key from a job's.
func (k IdemKey) isRequest() bool { return k.Jobs != nil }

// unfinishedStates are the states unique.states may name; "scheduled"
// (a job waiting for its runAt) counts once jobs can be in it.
var unfinishedStates = []jobtype.State{jobtype.StateWaiting, jobtype.StateDelayed, jobtype.StateQueued,
	jobtype.StateRunning, "scheduled"}

// dedup is the engine's memory of idempotency keys and unique jobs.
type dedup struct {
	keys      map[string]IdemKey // live keys of jobs
	requests  map[string]IdemKey // live keys of requests
	fifo      []IdemKey          // every key as it came, oldest first, for expiry
	unique    map[string][]string
	lastPrune time.Time
}

// batchDedup is what one enqueue adds before its jobs are live.
type batchDedup struct {
	keys   map[string]int // key → index of the spec that brings it
	unique map[string]int
}

// checkDedup validates a spec's idempotency key and unique options.
func checkDedup(sp *jobtype.JobSpec) error {
	if len(sp.IdempotencyKey) > MaxIdempotencyKey {
		return invalid("idempotencyKey", "%d bytes, over the limit of %d", len(sp.IdempotencyKey), MaxIdempotencyKey)
	}
	u := sp.Unique
	if u == nil {
		return nil
	}
	if u.ByPeriodMs < 0 {
		return invalid("unique.byPeriodMs", "%d is negative", u.ByPeriodMs)
	}
	for i, s := range u.States {
		if !slices.Contains(unfinishedStates, s) {
			return invalid(fmt.Sprintf("unique.states[%d]", i), "%q is not an unfinished state (%s); uniqueness holds among unfinished jobs", s, stateList())
		}
	}
	return nil
}

// EmptyKeyError is the error of an idempotency key given empty, which
// the API tells apart from one not given.
func EmptyKeyError(i int) error {
	return invalid(fmt.Sprintf("jobs[%d].idempotencyKey", i), "empty: a key is 1-%d bytes (leave the field out for none)", MaxIdempotencyKey)
}

func stateList() string {
	var b bytes.Buffer
	for i, s := range unfinishedStates {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(s))
	}
	return b.String()
}

// noDedupInWorkflow refuses the fields of this file in a workflow's job:
// a job that already exists cannot join a new workflow.
func noDedupInWorkflow(sp *jobtype.JobSpec) error {
	if sp.IdempotencyKey != "" {
		return invalid("idempotencyKey", notInWorkflow)
	}
	if sp.Unique != nil {
		return invalid("unique", notInWorkflow)
	}
	return nil
}

const notInWorkflow = "not supported in a workflow's job"

// KeyInWorkflowError is the error of an idempotency key given in a
// workflow's job i, even empty (which the API tells from none).
func KeyInWorkflowError(i int) error {
	return invalid(fmt.Sprintf("jobs[%d].idempotencyKey", i), notInWorkflow)
}

// uniqueKey is what makes jobs alike: queue, period and, by args, the
// payload with its object keys sorted and insignificant space removed.
func uniqueKey(sp *jobtype.JobSpec, created time.Time) string {
	u := sp.Unique
	h := sha256.New()
	h.Write([]byte(sp.Queue))
	var n [9]byte
	if u.ByPeriodMs > 0 {
		n[0] = 1
		binary.BigEndian.PutUint64(n[1:], uint64(created.UnixMilli()/u.ByPeriodMs))
	}
	h.Write(n[:])
	if u.ByArgs {
		h.Write(canonicalJSON(sp.Payload))
	}
	return string(h.Sum(nil))
}

// canonicalJSON re-encodes a JSON value with sorted object keys and its
// numbers as written; a value that does not parse is taken as it is.
func canonicalJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// expireKeysLocked forgets the keys older than the retention and, at
// most every keyPruneEvery, has the store delete them too.
func (e *Engine) expireKeysLocked(now time.Time) {
	d := &e.dd
	cut := now.Add(-e.cfg.KeyRetention)
	i := 0
	for i < len(d.fifo) && d.fifo[i].At.Before(cut) {
		k := d.fifo[i]
		if k.isRequest() {
			if cur, ok := d.requests[k.Key]; ok && cur.At.Equal(k.At) {
				delete(d.requests, k.Key)
			}
		} else if cur, ok := d.keys[k.Key]; ok && cur.Job == k.Job {
			delete(d.keys, k.Key)
		}
		i++
	}
	if i == 0 {
		return
	}
	clear(d.fifo[:i])
	d.fifo = d.fifo[i:]
	if now.Sub(d.lastPrune) >= keyPruneEvery {
		d.lastPrune = now
		e.emit(Op{Kind: OpPruneKeys, At: cut})
	}
}

// existingLocked returns the job that spec i of a batch repeats: the job
// of its idempotency key, or an unfinished unique job alike; the batch's
// own earlier specs count, given by their ids. uk is the spec's unique
// key ("" when it has none).
func (e *Engine) existingLocked(sp *jobtype.JobSpec, uk string, b *batchDedup, ids []string) (string, bool) {
	if sp.IdempotencyKey != "" {
		if k, ok := e.dd.keys[sp.IdempotencyKey]; ok {
			return jobID(k.Job), true
		}
		if j, ok := b.keys[sp.IdempotencyKey]; ok {
			return ids[j], true
		}
	}
	if uk == "" {
		return "", false
	}
	states := sp.Unique.States
	for _, id := range e.dd.unique[uk] {
		if j := e.live[id]; j != nil && (len(states) == 0 || slices.Contains(states, e.liveStateLocked(j))) {
			return id, true
		}
	}
	if j, ok := b.unique[uk]; ok && (len(states) == 0 || slices.Contains(states, jobtype.StateQueued) ||
		slices.Contains(states, jobtype.StateWaiting)) {
		return ids[j], true
	}
	return "", false
}

// remember records what a created job brings: its key and unique key.
func (b *batchDedup) remember(sp *jobtype.JobSpec, uk string, i int) {
	if sp.IdempotencyKey != "" {
		if b.keys == nil {
			b.keys = map[string]int{}
		}
		b.keys[sp.IdempotencyKey] = i
	}
	if uk != "" {
		if b.unique == nil {
			b.unique = map[string]int{}
		}
		b.unique[uk] = i
	}
}

// addKeyLocked keeps a created job's or a request's idempotency key.
func (e *Engine) addKeyLocked(k IdemKey) {
	m := &e.dd.keys
	if k.isRequest() {
		m = &e.dd.requests
	}
	if *m == nil {
		*m = map[string]IdemKey{}
	}
	(*m)[k.Key] = k
	e.dd.fifo = append(e.dd.fifo, k)
}

// addUniqueLocked indexes a live unique job under its unique key.
func (e *Engine) addUniqueLocked(j *liveJob, uk string) {
	if uk == "" {
		return
	}
	if e.dd.unique == nil {
		e.dd.unique = map[string][]string{}
	}
	j.unique = uk
	e.dd.unique[uk] = append(e.dd.unique[uk], j.id)
}

// dropUnique takes a job that left the unfinished ones out of the index.
func (e *Engine) dropUnique(j *liveJob) {
	if j.unique == "" {
		return
	}
	ids := slices.DeleteFunc(e.dd.unique[j.unique], func(id string) bool { return id == j.id })
	if len(ids) == 0 {
		delete(e.dd.unique, j.unique)
	} else {
		e.dd.unique[j.unique] = ids
	}
}

// specUniqueKey is a spec's unique key, "" when it is not unique.
func specUniqueKey(sp *jobtype.JobSpec, created time.Time) string {
	if sp.Unique == nil {
		return ""
	}
	return uniqueKey(sp, created)
}

// restoreDedupLocked rebuilds the keys kept and not expired; the jobs'
// unique index is rebuilt with them (restoreJobs).
func (e *Engine) restoreDedupLocked(keys []IdemKey) {
	keys = slices.Clone(keys)
	slices.SortStableFunc(keys, func(a, b IdemKey) int { return a.At.Compare(b.At) })
	for _, k := range keys {
		e.addKeyLocked(k)
	}
	e.expireKeysLocked(e.cfg.Now())
}

// checkDedupLocked checks the unique index against the live jobs: every
// indexed job is live under its key, and every live unique job indexed.
func (e *Engine) checkDedupLocked() error {
	n := 0
	for uk, ids := range e.dd.unique {
		for _, id := range ids {
			if j := e.live[id]; j == nil || j.unique != uk {
				return fmt.Errorf("jobs: unique index holds job %s, which is not live under that key", id)
			}
			n++
		}
	}
	for _, j := range e.live {
		if j.unique != "" {
			n--
		}
	}
	if n != 0 {
		return fmt.Errorf("jobs: unique index and live unique jobs differ by %d", n)
	}
	return nil
}

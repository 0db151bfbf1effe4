// Package redisq is usher's multi-node schema on Redis (docs/design.md,
// "Multi-node mode: roles and keys"): the task queue's key names under a
// prefix, the task hash and the messages the roles exchange
// through lists, and the client every role opens. The roles live in
// subpackages: frontend (queue servers), scheduler (the elected scheduler
// and its standbys) and backendrole (backends). docs/redis.md documents
// every key, its type, its owner and its expiry.
package redisq

import (
	"os"
	"strconv"
)

// DefaultPrefix puts every key in one hash slot, so that usher runs on
// Redis Cluster as it does on a single node.
const DefaultPrefix = "{usher}:"

// Keys names the task queue's keys under a prefix: this is the one place
// they are spelled (the jobs store's are in redisjobs, the tokens' in
// tokens). Every role builds its key names here and passes them to
// scripts in KEYS.
type Keys struct{ prefix string }

// NewKeys returns the key names under prefix.
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Prefix is the prefix every key starts with.
func (k Keys) Prefix() string { return k.prefix }

// TaskCounter is the task ID generator (int).
func (k Keys) TaskCounter() string { return k.prefix + "task.counter" }

// Task is a task's options (hash).
func (k Keys) Task(id string) string { return k.prefix + "task:" + id }

// TaskFiles is a task's source files, name → content (hash).
func (k Keys) TaskFiles(id string) string { return k.Task(id) + ":files" }

// TaskBackend receives the address of the backend that took the task (list).
func (k Keys) TaskBackend(id string) string { return k.Task(id) + ":backend" }

// TaskEstimate receives the task's queue estimates in float seconds (list).
func (k Keys) TaskEstimate(id string) string { return k.Task(id) + ":queue.estimate" }

// TaskControl receives the scheduler's decisions about a task: a new time
// limit, a denial or an end (list): usher's addition, the channel from the scheduler to the queue
// server that "send duration updates" needs.
func (k Keys) TaskControl(id string) string { return k.Task(id) + ":control" }

// TaskKeys lists every key of a task, for deleting them together.
func (k Keys) TaskKeys(id string) []string {
	return []string{k.Task(id), k.TaskFiles(id), k.TaskBackend(id), k.TaskEstimate(id), k.TaskControl(id)}
}

// Incoming is the list of new task IDs the scheduler takes.
func (k Keys) Incoming() string { return k.prefix + "queue.incoming" }

// Queue is the zset of queued task IDs, scored in arrival order.
func (k Keys) Queue() string { return k.prefix + "queue" }

// Outcoming is the stream of tasks handed to backends ({task: ID}).
func (k Keys) Outcoming() string { return k.prefix + "queue.outcoming" }

// Processing is the set of task IDs a backend took.
func (k Keys) Processing() string { return k.prefix + "queue.processing" }

// Finished is the list of task IDs whose slot is free again.
func (k Keys) Finished() string { return k.prefix + "queue.finished" }

// Executing maps the ID of every task holding a slot to the duration of
// the tier it holds (hash); the design also calls it queue.durations.
func (k Keys) Executing() string { return k.prefix + "queue.executing" }

// BackendCounter is the backend ID generator (int).
func (k Keys) BackendCounter() string { return k.prefix + "backend.counter" }

// BackendSet is the set of registered backend IDs.
func (k Keys) BackendSet() string { return k.prefix + "backend.set" }

// BackendUpdated is the list of backend IDs that arrived or left.
func (k Keys) BackendUpdated() string { return k.prefix + "backend.updated" }

// Backend is a backend's heartbeat (empty string with an expiry).
func (k Keys) Backend(id string) string { return k.prefix + "backend:" + id }

// Leader holds the leading scheduler's lease token (string with an expiry).
func (k Keys) Leader() string { return k.prefix + "scheduler.leader" }

// SchedulerAPI holds the leading scheduler's /v1 base URL (string, with the
// lease's expiry): queue servers proxy generic jobs to it.
func (k Keys) SchedulerAPI() string { return k.prefix + "scheduler.api" }

// Dashboard holds the deployment's dashboard as the leading scheduler last
// wrote it (string: a JSON Dashboard, with DashboardTTL's expiry).
func (k Keys) Dashboard() string { return k.prefix + "scheduler.dashboard" }

// DashboardHistory holds the dashboard's last hour, oldest first (list: a
// JSON dashboard.Sample each, at most dashboard.HistorySamples; the
// leading scheduler appends).
func (k Keys) DashboardHistory() string { return k.prefix + "scheduler.dashboard.history" }

// DashboardCounts holds what the queue servers counted in one interval of
// the history (hash: dashboard.Counts.Fields, with CountsTTL's expiry).
func (k Keys) DashboardCounts(interval int64) string {
	return k.prefix + "scheduler.dashboard.counts:" + strconv.FormatInt(interval, 10)
}

// Epoch counts leaderships (int); a new leader's token carries it.
func (k Keys) Epoch() string { return k.prefix + "scheduler.epoch" }

// Shares holds the kept shares (hash: id → the files as JSON). Shares,
// the result cache and the recent uploads live in hashes, not a key each,
// so that their scripts name every key they touch in KEYS.
func (k Keys) Shares() string { return k.prefix + "shares" }

// SharesOpened orders the kept shares by last open (zset: id → Unix
// seconds).
func (k Keys) SharesOpened() string { return k.prefix + "shares.opened" }

// SharesBytes is the stored bytes of all kept shares (int).
func (k Keys) SharesBytes() string { return k.prefix + "shares.bytes" }

// SharesGone records why a share is no longer kept (hash: id → expired
// or deleted).
func (k Keys) SharesGone() string { return k.prefix + "shares.gone" }

// SharesGoneAt orders the tombstones by when the share went (zset: id →
// Unix seconds), so that they are forgotten after shares.GoneFor.
func (k Keys) SharesGoneAt() string { return k.prefix + "shares.gone.at" }

// CacheEntries holds the result cache (hash: key → encoded entry).
func (k Keys) CacheEntries() string { return k.prefix + "cache.entries" }

// CacheUsed orders the result cache's entries by last use (zset: key →
// Unix milliseconds).
func (k Keys) CacheUsed() string { return k.prefix + "cache.used" }

// CacheBytes is the encoded size of all result cache entries (int).
func (k Keys) CacheBytes() string { return k.prefix + "cache.bytes" }

// Uploads holds the recent uploads that restore reads (hash: SHA-256 →
// the file).
func (k Keys) Uploads() string { return k.prefix + "uploads" }

// UploadsUsed orders the recent uploads by last use (zset: SHA-256 →
// Unix milliseconds).
func (k Keys) UploadsUsed() string { return k.prefix + "uploads.used" }

// UploadsBytes is the size of all recent uploads (int).
func (k Keys) UploadsBytes() string { return k.prefix + "uploads.bytes" }

// RenderSource is the source of a render API result by its content id
// (string: JSON files and options, expiring a retention after its last
// use), so that every queue server answers GET /api/render/{id}.{format}.
func (k Keys) RenderSource(id string) string { return k.prefix + "render.source:" + id }

// ConsumerGroup is the consumer group backends read Outcoming as.
const ConsumerGroup = "backend"

// DefaultNode names this process among the nodes of a deployment when it
// is given no name: host name and process id.
func DefaultNode() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "usher"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

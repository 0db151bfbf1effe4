package jobtype

import "time"

// Stats is the server's usage report (GET /v1/stats): per queue, key,
// group, tier and agent, and counters since the start. Every list is
// sent, empty or not.
type Stats struct {
	Queues   []QueueStats `json:"queues"`
	Keys     []KeyStats   `json:"keys"`
	Groups   []KeyStats   `json:"groups"`
	Tiers    []TierStats  `json:"tiers"`
	Agents   []AgentStats `json:"agents"`
	Counters Counters     `json:"counters"`
}

// QueueStats counts a queue's jobs: Queued are ready, Blocked those of
// them held back by a key, group or read/write gate, BlockedBy by which
// (sent always, {} when none is).
type QueueStats struct {
	Name      string         `json:"name"`
	Queued    int            `json:"queued"`
	Running   int            `json:"running"`
	Waiting   int            `json:"waiting"`
	Delayed   int            `json:"delayed"`
	Blocked   int            `json:"blocked"`
	BlockedBy map[string]int `json:"blockedBy"`
}

// KeyStats is a key's (or group's) running holders, limit and queued
// jobs. A key with a rate adds the Tokens its bucket holds and, when it is
// not full, when the next token is due (NextToken, RFC 3339).
type KeyStats struct {
	Key       string     `json:"key"`
	Running   int        `json:"running"`
	Limit     int        `json:"limit"`
	Queued    int        `json:"queued"`
	Tokens    *int       `json:"tokens,omitempty"`
	NextToken *time.Time `json:"nextToken,omitempty"`
}

// TierStats is a duration tier's use: Running jobs in it, Counted toward
// its limit (jobs of longer tiers count too).
type TierStats struct {
	Name       string `json:"name"`
	DurationMs int64  `json:"durationMs"`
	Running    int    `json:"running"`
	Counted    int    `json:"counted"`
	Limit      int    `json:"limit"`
}

// AgentStats is an agent's slots and running jobs.
type AgentStats struct {
	ID      string `json:"id"`
	Slots   int    `json:"slots"`
	Running int    `json:"running"`
}

// Counters are the server's event counts since its start. They are int64
// so that a long-running server's totals fit on any platform.
type Counters struct {
	Started       int64 `json:"started"`
	Succeeded     int64 `json:"succeeded"`
	Failed        int64 `json:"failed"`
	Retried       int64 `json:"retried"`
	Cancelled     int64 `json:"cancelled"`
	Downgrades    int64 `json:"downgrades"`
	LeaseExpiries int64 `json:"leaseExpiries"`
	// Snoozed counts attempts their handler snoozed; TimedOut attempts
	// the server ended past their time limit and grace (each also counts
	// as retried or failed); Expired jobs discarded at their deadline
	// (also in Cancelled).
	Snoozed  int64 `json:"snoozed"`
	TimedOut int64 `json:"timedOut"`
	Expired  int64 `json:"expired"`
}

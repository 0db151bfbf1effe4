package jobtype

// RetryPolicy is how often a job is tried and how long it waits between
// tries: at most MaxAttempts runs (0 and 1 mean one), the wait following
// Backoff. BackoffMs and MaxBackoffMs are the older form of an exponential
// Backoff (BaseMs and MaxMs); Backoff wins when both are given. The server
// sends every field, zeros too (Backoff when it has a base), and stores
// the policy in this form.
type RetryPolicy struct {
	MaxAttempts  int      `json:"maxAttempts"`
	BackoffMs    int64    `json:"backoffMs"`
	MaxBackoffMs int64    `json:"maxBackoffMs"`
	Backoff      *Backoff `json:"backoff,omitempty"`
}

// Backoff policies (Backoff.Policy).
const (
	BackoffExponential = "exponential"
	BackoffLinear      = "linear"
	BackoffConstant    = "constant"
)

// Backoff is the wait before a job's next try after attempt n failed:
// "exponential" (the default) waits a random time between 0 and
// BaseMs·2^(n-1) (full jitter), "linear" BaseMs·n, "constant" BaseMs;
// each at most MaxMs when that is set (0: no cap).
type Backoff struct {
	Policy string `json:"policy,omitempty"`
	BaseMs int64  `json:"baseMs"`
	MaxMs  int64  `json:"maxMs,omitempty"`
}

// Queue is a queue's configuration, as the server returns it. Retry is
// always sent (zero: one attempt per job).
type Queue struct {
	Name     string   `json:"name"`
	Priority int      `json:"priority"`
	Requires []string `json:"requires"`
	// Order is "fifo", "strict" or "random".
	Order  string      `json:"order"`
	Batch  int         `json:"batch"`
	Active bool        `json:"active"`
	Retry  RetryPolicy `json:"retry"`
	// StrictStart (strict queues only): the next job is handed out once
	// the agent holding the previous one confirmed it started (POST
	// /v1/agent/started), or that attempt ended.
	StrictStart bool `json:"strictStart"`
}

// QueueSpec is a queue to create (the body of POST /v1/queues). Zero
// fields take the server's defaults: priority 0, no required capabilities,
// order fifo, no batch cap, active, one attempt per job. Set Active to
// new(false) to create a paused queue.
type QueueSpec struct {
	Name     string       `json:"name"`
	Priority int          `json:"priority,omitempty"`
	Requires []string     `json:"requires,omitempty"`
	Order    string       `json:"order,omitempty"`
	Batch    int          `json:"batch,omitempty"`
	Active   *bool        `json:"active,omitempty"`
	Retry    *RetryPolicy `json:"retry,omitempty"`
	// StrictStart: see Queue.StrictStart; needs order strict.
	StrictStart bool `json:"strictStart,omitempty"`
}

// QueueUpdate names the fields of a queue to change (the body of PATCH
// /v1/queues/{name}); nil fields stay as they are.
type QueueUpdate struct {
	Priority *int         `json:"priority,omitempty"`
	Requires *[]string    `json:"requires,omitempty"`
	Order    *string      `json:"order,omitempty"`
	Batch    *int         `json:"batch,omitempty"`
	Active   *bool        `json:"active,omitempty"`
	Retry    *RetryPolicy `json:"retry,omitempty"`
	// StrictStart: see Queue.StrictStart.
	StrictStart *bool `json:"strictStart,omitempty"`
}

// QueueList is the answer of GET /v1/queues: every queue, sorted by name.
type QueueList struct {
	Queues []Queue `json:"queues"`
}

// FlushAnswer is the answer of POST /v1/queues/{name}/flush: how many
// queued jobs were cancelled.
type FlushAnswer struct {
	Cancelled int `json:"cancelled"`
}

// KeyLimit caps the running jobs that hold a key (Limit), how often they
// may start (Rate, "100/s", "6000/m" or "10/h", with Burst starts at once
// when the bucket is full; Burst defaults to the starts the rate allows in
// one second, at least 1), or both; a Pattern ending
// in "*" sets them for every key with that prefix, each key on its own.
// It is both the body and the answer of PUT /v1/limits, which replaces
// the pattern's settings; limit 0 and no rate removes it.
type KeyLimit struct {
	Pattern string `json:"pattern"`
	Limit   int    `json:"limit"`
	Rate    string `json:"rate,omitempty"`
	Burst   int    `json:"burst,omitempty"`
}

// KeyLimitList is the answer of GET /v1/limits: every key limit, sorted
// by pattern.
type KeyLimitList struct {
	Limits []KeyLimit `json:"limits"`
}

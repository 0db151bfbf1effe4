package jobtype

import "time"

// CronSpec is a periodic job to create (the body of POST /v1/cron): a job
// made from Job at every tick of Spec, read in Timezone. Spec is a
// standard 5-field cron expression ("*/15 9-17 * * MON-FRI") or a
// descriptor (@hourly, @daily, @weekly, @monthly, @yearly, @every 90s).
// Timezone is an IANA name ("Europe/Paris"); empty means UTC. Job.Queue
// may be left out (it is Queue) and Job.After must be.
type CronSpec struct {
	Name     string  `json:"name"`
	Spec     string  `json:"spec"`
	Queue    string  `json:"queue"`
	Timezone string  `json:"timezone,omitempty"`
	Job      JobSpec `json:"job"`
	// Paused creates the entry paused: it makes no job until resumed.
	Paused bool `json:"paused,omitempty"`
}

// Cron is a periodic job as the server returns it. NextAt is the next
// tick that will make a job (absent while paused); LastAt is the last
// tick that made one (absent before the first).
type Cron struct {
	Name     string     `json:"name"`
	Spec     string     `json:"spec"`
	Queue    string     `json:"queue"`
	Timezone string     `json:"timezone"`
	Job      JobSpec    `json:"job"`
	Paused   bool       `json:"paused"`
	NextAt   *time.Time `json:"nextAt,omitempty"`
	LastAt   *time.Time `json:"lastAt,omitempty"`
}

// CronUpdate is the body of PATCH /v1/cron/{name}: {"paused": true}
// pauses the entry, {"paused": false} resumes it.
type CronUpdate struct {
	Paused *bool `json:"paused,omitempty"`
}

// CronList is the answer of GET /v1/cron: every entry, sorted by name.
type CronList struct {
	Crons []Cron `json:"crons"`
}

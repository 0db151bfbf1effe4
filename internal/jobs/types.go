package jobs

import "github.com/usherhq/usher/jobtype"

// The engine speaks the /v1 wire types of package jobtype, the one
// definition it shares with the Go client; Filter is its own.

// Filter selects jobs to list. It is the engine's and the stores' query,
// not a wire body: the API reads it from the query string of GET /v1/jobs.
type Filter struct {
	Queue    string
	State    jobtype.State
	Workflow string
	After    int64 // ids above this one
	Limit    int
}

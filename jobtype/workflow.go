package jobtype

// WorkflowSpec is a workflow to submit (the body of POST /v1/workflows):
// jobs named within it and the edges between them (After and Edges may
// both be used).
type WorkflowSpec struct {
	Name  string         `json:"name,omitempty"`
	Jobs  []WorkflowJob  `json:"jobs"`
	Edges []WorkflowEdge `json:"edges,omitempty"`
}

// WorkflowJob is one job of a workflow, named within it; its After names
// other jobs of the workflow.
type WorkflowJob struct {
	Name string `json:"name"`
	JobSpec
}

// WorkflowEdge is a dependency of a workflow: job To (a name) runs after
// job From succeeded.
type WorkflowEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// SubmittedWorkflow is the answer to a submitted workflow: its id and the
// id of each job by name.
type SubmittedWorkflow struct {
	ID   string            `json:"id"`
	Jobs map[string]string `json:"jobs"`
}

// Workflow is a workflow as the server returns it.
type Workflow struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// State is "running" until every job finished, then "succeeded" if all
	// did, else "failed".
	State string `json:"state"`
	Jobs  []Job  `json:"jobs"`
}

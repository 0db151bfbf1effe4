package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/usherhq/usher/client"
)

func newWorkflowCommand() *cobra.Command {
	o := &clientOpts{}
	return group(o, "workflow", "Submit and show workflows (jobs with dependencies)",
		`workflow submits a set of named jobs with dependencies in one
atomic call, and shows a workflow's state and jobs. A job runs when every
job it depends on succeeded; a cycle is refused.`,
		workflowSubmitCommand(o), workflowShowCommand(o), workflowWaitCommand(o))
}

func workflowSubmitCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "submit FILE",
		Short: "Submit a workflow from a YAML or JSON file (- for stdin)",
		Long: `submit reads a workflow in YAML or JSON, the shape of docs/api.md's
/v1/workflows body: a name, jobs each with a unique name and any job field,
their dependencies in each job's after (names) or as edges. It prints the
workflow's id and each job's id.`,
		Example: `  usher workflow submit nightly.yaml

  # nightly.yaml
  name: nightly
  jobs:
    - {name: extract, queue: etl, payload: {table: users}}
    - {name: clean, queue: etl, after: [extract]}
    - {name: stats, queue: etl, after: [extract]}
    - {name: report, queue: etl, after: [clean, stats]}`,
		Args: cobra.ExactArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			data, err := readInput(cmd, args[0])
			if err != nil {
				return err
			}
			wf, err := parseWorkflow(data)
			if err != nil {
				return fmt.Errorf("%s: %w", inputName(args[0]), err)
			}
			got, err := c.SubmitWorkflow(cmd.Context(), wf)
			if err != nil {
				return fmt.Errorf("submitting workflow %s: %w", wf.Name, cycleHint(err))
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), got)
			}
			return printSubmitted(cmd, wf, got)
		}),
	}
}

// parseWorkflow reads a workflow in YAML (JSON is YAML too) and checks its
// fields by decoding it strictly as the API's JSON.
func parseWorkflow(data []byte) (client.WorkflowSpec, error) {
	var wf client.WorkflowSpec
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return wf, fmt.Errorf("not YAML or JSON: %w", err)
	}
	if doc == nil {
		return wf, fmt.Errorf("no workflow in it")
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return wf, fmt.Errorf("cannot be turned into JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wf); err != nil {
		return wf, fmt.Errorf("not a workflow: %w", err)
	}
	return wf, nil
}

// cycleHint names the jobs of a refused cycle when the server's text does
// not already.
func cycleHint(err error) error {
	var e *client.Error
	if errors.As(err, &e) && len(e.Cycle) > 0 && !strings.Contains(e.Message, e.Cycle[0]) {
		return fmt.Errorf("%w (cycle: %s)", err, strings.Join(e.Cycle, " → "))
	}
	return err
}

func printSubmitted(cmd *cobra.Command, wf client.WorkflowSpec, got client.SubmittedWorkflow) error {
	fmt.Fprintf(cmd.OutOrStdout(), "workflow %s submitted\n", got.ID)
	names := make([]string, 0, len(got.Jobs))
	for _, j := range wf.Jobs {
		names = append(names, j.Name)
	}
	if len(names) != len(got.Jobs) {
		names = names[:0]
		for n := range got.Jobs {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	t := newTable(cmd.OutOrStdout(), "NAME", "JOB")
	for _, n := range names {
		t.row(n, got.Jobs[n])
	}
	return t.flush()
}

func workflowShowCommand(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Short:   "Show a workflow's state and its jobs",
		Example: "  usher workflow show 3",
		Args:    cobra.ExactArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			wf, err := c.Workflow(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("reading workflow %s: %w", args[0], err)
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), wf)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workflow %s %s: %s\n", wf.ID, orDash(wf.Name), wf.State)
			return printJobs(cmd, wf.Jobs)
		}),
	}
}

// Exit statuses of usher workflow wait besides 0 (succeeded).
const (
	exitWorkflowFailed  = 1
	exitWorkflowRunning = 2
)

func workflowWaitCommand(o *clientOpts) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait until a workflow has finished; exit 0 if it succeeded",
		Long: `wait blocks until the workflow has finished, then shows it as show does.
It exits 0 when the workflow succeeded, 1 when it failed, and 2 when
--timeout ran out first (the workflow still runs). Without --timeout it
waits as long as it takes. Other errors (an unknown workflow, no server)
exit 1 too, with a message.`,
		Example: `  usher workflow wait 3 && echo done
  usher workflow wait 3 --timeout 10m`,
		Args: cobra.ExactArgs(1),
		RunE: withClient(o, func(cmd *cobra.Command, c *client.Client, args []string) error {
			return waitWorkflow(cmd, o, c, args[0], timeout)
		}),
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long and exit 2 (0: wait as long as it takes)")
	return cmd
}

func waitWorkflow(cmd *cobra.Command, o *clientOpts, c *client.Client, id string, timeout time.Duration) error {
	if timeout < 0 {
		return fmt.Errorf("--timeout %s is negative", timeout)
	}
	ctx := cmd.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	wf, err := c.WaitWorkflow(ctx, id)
	timedOut := err != nil && errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil
	if err != nil && !timedOut {
		return fmt.Errorf("waiting for workflow %s: %w", id, err)
	}
	if timedOut && wf.ID == "" { // the first request had not come back
		if wf, err = c.Workflow(cmd.Context(), id); err != nil {
			return fmt.Errorf("reading workflow %s: %w", id, err)
		}
	}
	if o.json {
		err = printJSON(cmd.OutOrStdout(), wf)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "workflow %s %s: %s\n", wf.ID, orDash(wf.Name), wf.State)
		err = printJobs(cmd, wf.Jobs)
	}
	if err != nil {
		return err
	}
	switch {
	case timedOut:
		return &exitStatus{code: exitWorkflowRunning, msg: fmt.Sprintf("workflow %s still runs after %s", id, timeout)}
	case wf.State != "succeeded":
		return &exitStatus{code: exitWorkflowFailed, msg: fmt.Sprintf("workflow %s %s", id, wf.State)}
	}
	return nil
}

// exitStatus is an error that ends usher with its own exit status.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }

// ExitStatus is the status usher exits with.
func (e *exitStatus) ExitStatus() int { return e.code }

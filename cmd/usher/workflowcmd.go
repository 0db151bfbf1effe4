package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

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
		workflowSubmitCommand(o), workflowShowCommand(o))
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

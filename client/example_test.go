package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
)

// exampleServer runs a real /v1 server on a SQLite file in a temporary
// directory and returns an admin client of it; stop ends the server and
// removes the directory.
func exampleServer() (c *client.Client, stop func(), err error) {
	dir, err := os.MkdirTemp("", "usher-example-")
	if err != nil {
		return nil, nil, fmt.Errorf("making a data directory: %w", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, stopServer, err := jobsapitest.Open(filepath.Join(dir, "usher.db"), jobsapitest.Options{Logger: quiet})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return client.New(srv.URL, srv.AdminToken), func() {
		stopServer()
		os.RemoveAll(dir)
	}, nil
}

// exampleQueue runs a server with one queue and returns an admin client
// of it and a context that ends in 30 s; done ends both.
func exampleQueue(queue string) (ctx context.Context, c *client.Client, done func(), err error) {
	c, stop, err := exampleServer()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done = func() { cancel(); stop() }
	if _, err := c.CreateQueue(ctx, client.QueueSpec{Name: queue}); err != nil {
		done()
		return nil, nil, nil, err
	}
	return ctx, c, done, nil
}

// startWorker runs w until stop, which returns Run's error.
func startWorker(ctx context.Context, w *client.Worker) (stop func() error) {
	w.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return func() error {
		cancel()
		return <-errc
	}
}

// waitFinished polls a job until it is in a final state.
func waitFinished(ctx context.Context, c *client.Client, id string) (client.Job, error) {
	for {
		j, err := c.Job(ctx, id)
		if err != nil || j.Finished() {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("job %s still %s: %w", id, j.State, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Submit a job to a queue and read it back.
func ExampleClient_Enqueue() {
	ctx, c, done, err := exampleQueue("scan")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	ids, err := c.Enqueue(ctx, client.JobSpec{Queue: "scan", Payload: json.RawMessage(`"10.1.2.3"`),
		Keys: []string{"net:10.1.2.0/24"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	j, err := c.Job(ctx, ids[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(ids), "job:", j.Queue, j.State, string(j.Payload), j.Keys)
	// Output:
	// 1 job: scan queued "10.1.2.3" [net:10.1.2.0/24]
}

// Serve the jobs of a queue with a handler, one Worker being one agent.
func ExampleWorker() {
	ctx, c, done, err := exampleQueue("greet")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	ids, err := c.Enqueue(ctx, client.JobSpec{Queue: "greet", Payload: json.RawMessage(`"world"`)},
		client.JobSpec{Queue: "greet", Payload: json.RawMessage(`42`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	stopWorker := startWorker(ctx, &client.Worker{Client: c, Agent: "example", Concurrency: 2, WaitMs: 200,
		Handlers: map[string]client.Handler{"greet": func(ctx context.Context, job *client.LeasedJob) (string, error) {
			var name string
			if err := json.Unmarshal(job.Payload, &name); err != nil {
				return "", errors.New("the payload is not a name")
			}
			return "hello, " + name, nil
		}}})
	for _, id := range ids {
		j, err := waitFinished(ctx, c, id)
		if err != nil {
			fmt.Println(err)
			break
		}
		fmt.Printf("%s: %s %q %q\n", j.Payload, j.State, j.Output, j.Error)
	}
	if err := stopWorker(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// "world": succeeded "hello, world" ""
	// 42: failed "" "the payload is not a name"
}

// Submit a workflow whose jobs run in dependency order, and follow it to
// its end.
func ExampleClient_SubmitWorkflow() {
	ctx, c, done, err := exampleQueue("etl")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	// extract runs first; load runs after both transforms succeeded.
	sub, err := c.SubmitWorkflow(ctx, client.WorkflowSpec{Name: "nightly", Jobs: []client.WorkflowJob{
		{Name: "extract", JobSpec: client.JobSpec{Queue: "etl"}},
		{Name: "clean", JobSpec: client.JobSpec{Queue: "etl", After: []string{"extract"}}},
		{Name: "index", JobSpec: client.JobSpec{Queue: "etl"}},
		{Name: "load", JobSpec: client.JobSpec{Queue: "etl", After: []string{"clean", "index"}}},
	}, Edges: []client.Edge{{From: "extract", To: "index"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	names := map[string]string{} // job id → name
	for name, id := range sub.Jobs {
		names[id] = name
	}
	wf, err := c.Workflow(ctx, sub.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(wf.Name, wf.State)
	for _, j := range wf.Jobs {
		fmt.Println(" ", names[j.ID], j.State)
	}
	// One job at a time, so the order of the runs is the order the
	// dependencies allow.
	var ran []string
	stopWorker := startWorker(ctx, &client.Worker{Client: c, Agent: "example", WaitMs: 200,
		Handlers: map[string]client.Handler{"etl": func(ctx context.Context, job *client.LeasedJob) (string, error) {
			ran = append(ran, names[job.ID])
			return "", nil
		}}})
	_, err = waitFinished(ctx, c, sub.Jobs["load"])
	if err := errors.Join(err, stopWorker()); err != nil {
		fmt.Println(err)
		return
	}
	if wf, err = c.Workflow(ctx, sub.ID); err != nil {
		fmt.Println(err)
		return
	}
	if len(ran) != 4 {
		fmt.Println("ran", ran)
		return
	}
	fmt.Println(wf.Name, wf.State, "after", ran[0], "then", slices.Sorted(slices.Values(ran[1:3])), "then", ran[3])
	// Output:
	// nightly running
	//   extract queued
	//   clean waiting
	//   index waiting
	//   load waiting
	// nightly succeeded after extract then [clean index] then load
}

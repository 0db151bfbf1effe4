package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
)

// step is one call of the end-to-end table: it returns an error (checked
// against status and msg) and may check what it got.
type step struct {
	name   string
	call   func(ctx context.Context) error
	status int    // expected *client.Error status; 0: success
	msg    string // expected part of the error message
}

// Every method against the real server, in an order a user would follow:
// answers decode into the typed results, and the server's errors arrive as
// *client.Error with its status and text (401 without or with an unknown
// token, 403 for an agent token on an admin call).
func TestClientEndToEnd(t *testing.T) {
	srv := jobsapitest.Start(t)
	ctx := t.Context()
	admin := client.New(srv.URL+"/", srv.AdminToken) // a trailing slash is fine
	var (
		jobIDs, targetIDs []string
		agentTok          client.NewToken
		clientTok         client.NewToken
		wf                client.SubmittedWorkflow
		leased            client.LeaseAnswer
	)
	agent := func() *client.Client { return client.New(srv.URL, agentTok.Secret) }
	want := func(cond bool, format string, args ...any) error {
		if !cond {
			return errors.New("unexpected: " + fmt.Sprintf(format, args...))
		}
		return nil
	}
	steps := []step{
		{name: "create queue", call: func(ctx context.Context) error {
			q, err := admin.CreateQueue(ctx, client.QueueSpec{Name: "scan", Priority: 10, Requires: []string{"net"},
				Order: "random", Batch: 2, Retry: &client.RetryPolicy{MaxAttempts: 3, BackoffMs: 1000, MaxBackoffMs: 60000}})
			if err != nil {
				return err
			}
			return want(q.Name == "scan" && q.Priority == 10 && q.Order == "random" && q.Batch == 2 && q.Active &&
				slices.Equal(q.Requires, []string{"net"}) && q.Retry.MaxAttempts == 3, "queue %+v", q)
		}},
		{name: "create paused queue", call: func(ctx context.Context) error {
			q, err := admin.CreateQueue(ctx, client.QueueSpec{Name: "etl", Active: new(false)})
			if err != nil {
				return err
			}
			return want(!q.Active && q.Order == "fifo", "queue %+v", q)
		}},
		{name: "queue exists", status: 409, call: func(ctx context.Context) error {
			_, err := admin.CreateQueue(ctx, client.QueueSpec{Name: "scan"})
			return err
		}},
		{name: "bad queue name", status: 400, msg: "name", call: func(ctx context.Context) error {
			_, err := admin.CreateQueue(ctx, client.QueueSpec{Name: "no spaces"})
			return err
		}},
		{name: "unknown queue", status: 404, call: func(ctx context.Context) error {
			_, err := admin.Queue(ctx, "nope")
			return err
		}},
		{name: "update queue", call: func(ctx context.Context) error {
			q, err := admin.UpdateQueue(ctx, "etl", client.QueueUpdate{Priority: new(5), Active: new(true)})
			if err != nil {
				return err
			}
			return want(q.Priority == 5 && q.Active && q.Name == "etl", "queue %+v", q)
		}},
		{name: "list queues", call: func(ctx context.Context) error {
			qs, err := admin.Queues(ctx)
			return errors.Join(err, want(len(qs) == 2 && qs[0].Name == "etl" && qs[1].Name == "scan", "queues %+v", qs))
		}},
		{name: "set key limit", call: func(ctx context.Context) error {
			l, err := admin.SetKeyLimit(ctx, "net:*", 5)
			return errors.Join(err, want(l == client.KeyLimit{Pattern: "net:*", Limit: 5}, "limit %+v", l))
		}},
		{name: "set key rate", call: func(ctx context.Context) error {
			l, err := admin.PutKeyLimit(ctx, client.KeyLimit{Pattern: "api:*", Rate: "100/s"})
			return errors.Join(err, want(l == client.KeyLimit{Pattern: "api:*", Rate: "100/s", Burst: 100}, "limit %+v", l))
		}},
		{name: "list key limits", call: func(ctx context.Context) error {
			ls, err := admin.KeyLimits(ctx)
			return errors.Join(err, want(slices.Equal(ls, []client.KeyLimit{{Pattern: "api:*", Rate: "100/s", Burst: 100},
				{Pattern: "net:*", Limit: 5}}), "limits %+v", ls))
		}},
		{name: "enqueue", call: func(ctx context.Context) error {
			var err error
			jobIDs, err = admin.Enqueue(ctx,
				client.JobSpec{Queue: "etl", Payload: json.RawMessage(`{"table":"users"}`), Priority: 3},
				client.JobSpec{Queue: "etl", Keys: []string{"db:1"}, Group: "db1", Mode: "write"})
			return errors.Join(err, want(len(jobIDs) == 2 && jobIDs[0] < jobIDs[1], "ids %v", jobIDs))
		}},
		{name: "enqueue names the bad job", status: 400, msg: "jobs[1]", call: func(ctx context.Context) error {
			_, err := admin.Enqueue(ctx, client.JobSpec{Queue: "etl"}, client.JobSpec{Queue: "nope"})
			return err
		}},
		{name: "enqueue targets", call: func(ctx context.Context) error {
			var err error
			targetIDs, err = admin.EnqueueTargets(ctx, "scan", strings.NewReader("10.1.2.3\n\n  10.1.2.4  \n2001:db8::1\n"))
			if err != nil {
				return err
			}
			j, err := admin.Job(ctx, targetIDs[1])
			return errors.Join(err, want(len(targetIDs) == 3 && string(j.Payload) == `"10.1.2.4"` &&
				slices.Equal(j.Keys, []string{"net:10.1.2.0/24"}) && j.State == client.StateQueued, "ids %v, job %+v", targetIDs, j))
		}},
		{name: "get job", call: func(ctx context.Context) error {
			j, err := admin.Job(ctx, jobIDs[0])
			return errors.Join(err, want(j.ID == jobIDs[0] && j.Queue == "etl" && j.Priority == 3 &&
				string(j.Payload) == `{"table":"users"}` && !j.CreatedAt.IsZero() && j.StartedAt == nil &&
				j.ExitCode == nil && !j.Finished(), "job %+v", j))
		}},
		{name: "unknown job", status: 404, call: func(ctx context.Context) error {
			_, err := admin.Job(ctx, "999999")
			return err
		}},
		{name: "list a page", call: func(ctx context.Context) error {
			p, err := admin.Jobs(ctx, client.JobFilter{Queue: "scan", Limit: 2})
			return errors.Join(err, want(len(p.Jobs) == 2 && p.Jobs[0].ID == targetIDs[0] && p.Next == targetIDs[1], "page %+v", p))
		}},
		{name: "list every page", call: func(ctx context.Context) error {
			var ids []string
			for j, err := range admin.AllJobs(ctx, client.JobFilter{Queue: "scan", Limit: 1}) {
				if err != nil {
					return err
				}
				ids = append(ids, j.ID)
			}
			return want(slices.Equal(ids, targetIDs), "ids %v, want %v", ids, targetIDs)
		}},
		{name: "list by state", call: func(ctx context.Context) error {
			p, err := admin.Jobs(ctx, client.JobFilter{State: client.StateQueued})
			return errors.Join(err, want(len(p.Jobs) == 5 && p.Next == "", "page %+v", p))
		}},
		{name: "cancel", call: func(ctx context.Context) error {
			j, err := admin.Cancel(ctx, targetIDs[2])
			return errors.Join(err, want(j.State == client.StateCancelled && j.Finished(), "job %+v", j))
		}},
		{name: "cancel a finished job", status: 409, call: func(ctx context.Context) error {
			_, err := admin.Cancel(ctx, targetIDs[2])
			return err
		}},
		{name: "retry", call: func(ctx context.Context) error {
			j, err := admin.Retry(ctx, targetIDs[2])
			return errors.Join(err, want(j.State == client.StateQueued, "job %+v", j))
		}},
		{name: "retry a queued job", status: 409, call: func(ctx context.Context) error {
			_, err := admin.Retry(ctx, targetIDs[2])
			return err
		}},
		{name: "submit workflow", call: func(ctx context.Context) error {
			var err error
			wf, err = admin.SubmitWorkflow(ctx, client.WorkflowSpec{Name: "diamond", Jobs: []client.WorkflowJob{
				{Name: "a", JobSpec: client.JobSpec{Queue: "etl"}},
				{Name: "b", JobSpec: client.JobSpec{Queue: "etl", After: []string{"a"}}},
				{Name: "c", JobSpec: client.JobSpec{Queue: "etl"}},
				{Name: "d", JobSpec: client.JobSpec{Queue: "etl", After: []string{"b", "c"}}},
			}, Edges: []client.Edge{{From: "a", To: "c"}}})
			return errors.Join(err, want(wf.ID != "" && len(wf.Jobs) == 4 && wf.Jobs["a"] != "", "workflow %+v", wf))
		}},
		{name: "show workflow", call: func(ctx context.Context) error {
			w, err := admin.Workflow(ctx, wf.ID)
			if err != nil {
				return err
			}
			states := map[string]client.State{}
			for _, j := range w.Jobs {
				states[j.ID] = j.State
			}
			return want(w.Name == "diamond" && w.State == "running" && len(w.Jobs) == 4 &&
				states[wf.Jobs["a"]] == client.StateQueued && states[wf.Jobs["d"]] == client.StateWaiting, "workflow %+v", w)
		}},
		{name: "workflow cycle", status: 400, msg: "cycle", call: func(ctx context.Context) error {
			_, err := admin.SubmitWorkflow(ctx, client.WorkflowSpec{Jobs: []client.WorkflowJob{
				{Name: "x", JobSpec: client.JobSpec{Queue: "etl", After: []string{"y"}}},
				{Name: "y", JobSpec: client.JobSpec{Queue: "etl", After: []string{"x"}}},
			}})
			var e *client.Error
			if errors.As(err, &e) && len(e.Cycle) != 2 {
				return errors.New("cycle not listed: " + fmt.Sprintf("%+v", e))
			}
			return err
		}},
		{name: "stats", call: func(ctx context.Context) error {
			s, err := admin.Stats(ctx)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(s.Queues, func(q client.QueueStats) bool { return q.Name == "scan" })
			return want(i >= 0 && s.Queues[i].Queued == 3 && len(s.Tiers) > 0, "stats %+v", s)
		}},
		{name: "create agent token", call: func(ctx context.Context) error {
			var err error
			agentTok, err = admin.CreateToken(ctx, "scanner-7", client.RoleAgent)
			return errors.Join(err, want(strings.HasPrefix(agentTok.Secret, "usher_") && agentTok.Role == "agent" &&
				agentTok.Name == "scanner-7" && agentTok.ID != "" && !agentTok.CreatedAt.IsZero(), "token %+v", agentTok))
		}},
		{name: "create client token", call: func(ctx context.Context) error {
			var err error
			clientTok, err = admin.CreateToken(ctx, "ci", client.RoleClient)
			return err
		}},
		{name: "list tokens", call: func(ctx context.Context) error {
			ts, err := admin.Tokens(ctx)
			i := slices.IndexFunc(ts, func(tk client.Token) bool { return tk.ID == agentTok.ID })
			return errors.Join(err, want(i >= 0 && ts[i].Name == "scanner-7" && ts[i].Role == "agent", "tokens %+v", ts))
		}},
		{name: "no token", status: 401, msg: "missing or unknown token", call: func(ctx context.Context) error {
			_, err := client.New(srv.URL, "").Queues(ctx)
			return err
		}},
		{name: "unknown token", status: 401, call: func(ctx context.Context) error {
			_, err := client.New(srv.URL, "usher_nope").Stats(ctx)
			return err
		}},
		{name: "agent token on an admin call", status: 403, msg: "role agent", call: func(ctx context.Context) error {
			_, err := agent().CreateQueue(ctx, client.QueueSpec{Name: "mine"})
			return err
		}},
		{name: "client token may not lease", status: 403, msg: "role client", call: func(ctx context.Context) error {
			_, err := client.New(srv.URL, clientTok.Secret).Lease(ctx, client.LeaseRequest{Agent: "x", Slots: 1})
			return err
		}},
		{name: "client token enqueues", call: func(ctx context.Context) error {
			ids, err := client.New(srv.URL, clientTok.Secret).Enqueue(ctx, client.JobSpec{Queue: "etl", Payload: json.RawMessage(`"x"`)})
			return errors.Join(err, want(len(ids) == 1, "ids %v", ids))
		}},
		{name: "lease", call: func(ctx context.Context) error {
			var err error
			leased, err = agent().Lease(ctx, client.LeaseRequest{Agent: "host-1", Slots: 1, WaitMs: 0})
			return errors.Join(err, want(len(leased.Jobs) == 1 && leased.Jobs[0].Queue == "etl" && leased.Jobs[0].Attempt == 1 &&
				leased.Jobs[0].TimeoutMs > 0 && leased.LeaseMs > 0, "lease %+v", leased))
		}},
		{name: "renew", call: func(ctx context.Context) error {
			r, err := agent().Renew(ctx, "host-1")
			return errors.Join(err, want(r.LeaseMs > 0 && len(r.Stop) == 0, "renew %+v", r))
		}},
		{name: "complete", call: func(ctx context.Context) error {
			j := leased.Jobs[0]
			acks, err := agent().Complete(ctx, "host-1", client.Result{ID: j.ID, Attempt: j.Attempt, Output: "done\n"})
			if err != nil {
				return err
			}
			got, err := admin.Job(ctx, j.ID)
			return errors.Join(err, want(len(acks) == 1 && !acks[0].Ignored && got.State == client.StateSucceeded &&
				got.Output == "done\n" && got.ExitCode != nil && *got.ExitCode == 0 && got.Agent == "host-1" &&
				got.FinishedAt != nil && !got.FinishedAt.IsZero(), "acks %+v, job %+v", acks, got))
		}},
		{name: "repeated completion ignored", call: func(ctx context.Context) error {
			j := leased.Jobs[0]
			acks, err := agent().Complete(ctx, "host-1", client.Result{ID: j.ID, Attempt: j.Attempt, ExitCode: 1},
				client.Result{ID: "999999", Attempt: 1})
			return errors.Join(err, want(len(acks) == 2 && acks[0].Ignored && acks[1].Ignored, "acks %+v", acks))
		}},
		{name: "leave", call: func(ctx context.Context) error { return agent().Leave(ctx, "host-1") }},
		{name: "renew after leaving", status: 404, call: func(ctx context.Context) error {
			_, err := agent().Renew(ctx, "host-1")
			return err
		}},
		{name: "agent reads jobs", call: func(ctx context.Context) error {
			_, err := agent().Job(ctx, jobIDs[0])
			return err
		}},
		{name: "flush", call: func(ctx context.Context) error {
			n, err := admin.FlushQueue(ctx, "scan")
			return errors.Join(err, want(n == 3, "cancelled %d", n))
		}},
		{name: "delete queue", call: func(ctx context.Context) error { return admin.DeleteQueue(ctx, "scan") }},
		{name: "deleted queue is gone", status: 404, call: func(ctx context.Context) error {
			_, err := admin.Queue(ctx, "scan")
			return err
		}},
		{name: "delete token", call: func(ctx context.Context) error { return admin.DeleteToken(ctx, agentTok.ID) }},
		{name: "deleted token refused", status: 401, call: func(ctx context.Context) error {
			_, err := agent().Job(ctx, jobIDs[0])
			return err
		}},
	}
	for _, s := range steps {
		err := s.call(ctx)
		var e *client.Error
		switch {
		case s.status == 0 && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.status != 0 && !errors.As(err, &e):
			t.Fatalf("%s: error %v, want a *client.Error with status %d", s.name, err, s.status)
		case s.status != 0 && (e.Status != s.status || !strings.Contains(e.Message, s.msg)):
			t.Fatalf("%s: error %d %q, want %d with %q", s.name, e.Status, e.Message, s.status, s.msg)
		case s.status != 0 && client.StatusOf(err) != s.status:
			t.Fatalf("%s: StatusOf = %d", s.name, client.StatusOf(err))
		}
	}
}

// A server that cannot be reached gives an error naming the URL, not a
// *client.Error; a cancelled context ends a long-poll at once.
func TestClientTransportErrors(t *testing.T) {
	srv := jobsapitest.Start(t)
	_, err := client.New("http://127.0.0.1:1", "x").Queues(t.Context())
	if err == nil || client.StatusOf(err) != 0 || !strings.Contains(err.Error(), "http://127.0.0.1:1/v1/queues") {
		t.Fatalf("unreachable server: %v", err)
	}
	c := client.New(srv.URL, srv.AdminToken)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	began := time.Now()
	go func() {
		_, err := c.Lease(ctx, client.LeaseRequest{Agent: "a", Slots: 1, WaitMs: 60000})
		done <- err
	}()
	cancel()
	if err := testwait.Receive(t, 10*time.Second, done, "the cancelled lease request returning"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled lease: %v", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("cancelled lease returned after %s", d)
	}
}

package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
)

// The periodic-job methods against the real server: create, read, list,
// pause, resume, delete; a taken name is a 409, a bad spec a 400 naming
// spec, and a client token may read periodic jobs but not create them.
func TestClientCron(t *testing.T) {
	srv := jobsapitest.Start(t)
	ctx := t.Context()
	admin := client.New(srv.URL, srv.AdminToken)
	if _, err := admin.CreateQueue(ctx, client.QueueSpec{Name: "reports"}); err != nil {
		t.Fatal(err)
	}
	spec := client.CronSpec{Name: "nightly", Spec: "30 2 * * *", Queue: "reports", Timezone: "Europe/Paris",
		Job: client.JobSpec{Payload: json.RawMessage(`{"kind":"daily"}`), Priority: 5}}
	c, err := admin.CreateCron(ctx, spec)
	if err != nil || c.Timezone != "Europe/Paris" || c.NextAt == nil || c.Job.Priority != 5 || c.Queue != "reports" {
		t.Fatalf("CreateCron = %+v, %v", c, err)
	}
	var apiErr *client.Error
	if _, err := admin.CreateCron(ctx, spec); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("a taken name: %v; want a 409", err)
	}
	bad := spec
	bad.Name, bad.Spec = "bad", "30 2 * *"
	if _, err := admin.CreateCron(ctx, bad); !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(err.Error(), "spec:") {
		t.Fatalf("a bad spec: %v; want a 400 naming spec", err)
	}
	if p, err := admin.PauseCron(ctx, "nightly"); err != nil || !p.Paused || p.NextAt != nil {
		t.Fatalf("PauseCron = %+v, %v", p, err)
	}
	if r, err := admin.ResumeCron(ctx, "nightly"); err != nil || r.Paused || r.NextAt == nil {
		t.Fatalf("ResumeCron = %+v, %v", r, err)
	}
	tok, err := admin.CreateToken(ctx, "ci", client.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	user := client.New(srv.URL, tok.Secret)
	if list, err := user.Crons(ctx); err != nil || len(list) != 1 || list[0].Name != "nightly" {
		t.Fatalf("Crons as a client = %+v, %v", list, err)
	}
	spec.Name = "mine"
	if _, err := user.CreateCron(ctx, spec); !errors.As(err, &apiErr) || apiErr.Status != 403 {
		t.Fatalf("CreateCron as a client: %v; want a 403", err)
	}
	if err := admin.DeleteCron(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Cron(ctx, "nightly"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("Cron after DeleteCron: %v; want a 404", err)
	}
}

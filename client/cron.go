package client

import (
	"context"
	"net/http"

	"github.com/usherhq/usher/jobtype"
)

type (
	// CronSpec is a periodic job to create.
	CronSpec = jobtype.CronSpec
	// Cron is a periodic job as the server returns it.
	Cron = jobtype.Cron
)

// CreateCron adds a periodic job (admin): a job made from spec.Job at
// every tick of spec.Spec. A name that exists already is a 409.
func (c *Client) CreateCron(ctx context.Context, spec CronSpec) (Cron, error) {
	var out Cron
	err := c.call(ctx, http.MethodPost, "/v1/cron", spec, &out)
	return out, err
}

// Cron returns one periodic job.
func (c *Client) Cron(ctx context.Context, name string) (Cron, error) {
	var out Cron
	err := c.call(ctx, http.MethodGet, "/v1/cron/"+esc(name), nil, &out)
	return out, err
}

// Crons returns every periodic job, sorted by name.
func (c *Client) Crons(ctx context.Context) ([]Cron, error) {
	var out jobtype.CronList
	err := c.call(ctx, http.MethodGet, "/v1/cron", nil, &out)
	return out.Crons, err
}

// PauseCron pauses a periodic job (admin): it makes no job until resumed.
func (c *Client) PauseCron(ctx context.Context, name string) (Cron, error) {
	return c.setCronPaused(ctx, name, true)
}

// ResumeCron resumes a paused periodic job (admin); ticks that passed
// while it was paused are skipped.
func (c *Client) ResumeCron(ctx context.Context, name string) (Cron, error) {
	return c.setCronPaused(ctx, name, false)
}

func (c *Client) setCronPaused(ctx context.Context, name string, paused bool) (Cron, error) {
	var out Cron
	err := c.call(ctx, http.MethodPatch, "/v1/cron/"+esc(name), jobtype.CronUpdate{Paused: &paused}, &out)
	return out, err
}

// DeleteCron removes a periodic job (admin); the jobs it made stay.
func (c *Client) DeleteCron(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/v1/cron/"+esc(name), nil, nil)
}

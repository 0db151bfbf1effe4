package main

import (
	"context"
	"errors"
)

// usherSystem is a placeholder until usher's /v1 server and Go client
// package are on main.
type usherSystem struct{}

func newUsherSystem(bin string, batch, enqueuers, agents int) system { return usherSystem{} }

var errNoUsher = errors.New("usher's /v1 jobs API and client package are not there yet")

func (usherSystem) setup(context.Context, string) error            { return errNoUsher }
func (usherSystem) reset(context.Context) error                    { return errNoUsher }
func (usherSystem) enqueue(context.Context, int) error             { return errNoUsher }
func (usherSystem) enqueueOne(context.Context) error               { return errNoUsher }
func (usherSystem) startWorkers(context.Context, int, *hook) error { return errNoUsher }
func (usherSystem) stopWorkers(context.Context) error              { return errNoUsher }
func (usherSystem) unfinished(context.Context) (int, error)        { return 0, errNoUsher }
func (usherSystem) describe() description                          { return description{} }
func (usherSystem) close()                                         {}

package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// errNotYet is returned by roles whose implementation has not landed yet.
var errNotYet = errors.New("not yet: the service lands with the Asymptote service issue")

func newServeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the service: web app, /asy queue protocol, JSON API and local backends",
		Long: `serve runs the embedded default: one process with the HTTP server on :8080,
the scheduling core, a SQLite file for durable state and local sandboxed
Asymptote backends.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("serve: %w", errNotYet)
		},
	}
}

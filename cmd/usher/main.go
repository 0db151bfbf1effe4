// Command usher is the one binary of usher: a job scheduler and an online
// Asymptote compile service. Each role (the service, a remote backend, an
// agent, the Redis scheduler) is a subcommand; see `usher --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "usher:", err)
		code := 1
		var es interface{ ExitStatus() int }
		if errors.As(err, &es) {
			code = es.ExitStatus()
		}
		os.Exit(code)
	}
}

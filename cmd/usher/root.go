package main

import (
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "usher",
		Short: "A job scheduler and an online Asymptote compile service",
		Long: `usher schedules work under rules most queues lack: duration tiers with
preemption, per-key concurrency limits shared by every queue, exclusive
read/write groups and dependency workflows. The same scheduler runs an online
Asymptote compile service with sandboxed backends.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newBackendCommand(), newAgentCommand(),
		newQueueCommand(), newLimitCommand(), newEnqueueCommand(), newTargetsCommand(),
		newWorkflowCommand(), newJobsCommand(), newStatsCommand(), newTokenCommand(),
		newSchedulerCommand(), newShareCommand(), newBackupCommand(), newCronCommand())
	return root
}

package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/usherhq/usher/internal/sandbox"
)

// byteSize is a flag value in bytes that also takes binary and decimal
// suffixes: 512KiB, 64MiB, 1GiB, 10K, 5M, 2G.
type byteSize int64

var sizeSuffixes = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"K", 1000}, {"M", 1000 * 1000}, {"G", 1000 * 1000 * 1000}, {"B", 1},
}

// String prints the value in bytes.
func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Type names the flag's type in --help.
func (b *byteSize) Type() string { return "bytes" }

// Set parses a size with an optional suffix.
func (b *byteSize) Set(s string) error {
	num, factor := strings.TrimSpace(s), int64(1)
	for _, sf := range sizeSuffixes {
		if strings.HasSuffix(num, sf.suffix) {
			num, factor = strings.TrimSpace(strings.TrimSuffix(num, sf.suffix)), sf.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/factor {
		return fmt.Errorf("%q is not a size: use bytes or a suffix KiB, MiB, GiB, K, M, G", s)
	}
	*b = byteSize(n * factor)
	return nil
}

// envFallback sets every flag of cmd not given on the command line from
// the environment variable prefix + its name in capitals with '_' for '-'
// (USHER_BACKEND_MAX_UPLOAD for --max-upload), and names the variable in
// the flag's usage.
func envFallback(cmd *cobra.Command, prefix string) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		f.Usage += fmt.Sprintf(" [$%s]", envName(prefix, f.Name))
	})
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		var err error
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			v, ok := os.LookupEnv(envName(prefix, f.Name))
			if !ok || f.Changed || err != nil {
				return
			}
			if e := cmd.Flags().Set(f.Name, v); e != nil {
				err = fmt.Errorf("$%s: %w", envName(prefix, f.Name), e)
			}
		})
		return err
	}
}

func envName(prefix, flag string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// sandboxFlags are the sandbox's flags, shared by `usher backend` and
// `usher serve` (whose local backends use the same runner). Zero values
// mean the runner's documented defaults (docs/sandbox.md).
type sandboxFlags struct {
	insecure                              bool
	workRoot                              string
	addressSpace, fileSize, output, image byteSize
	cpuTime, maxTimeout, interactiveIdle  time.Duration
	processes, openFiles                  int
}

func (s *sandboxFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&s.insecure, "insecure", false, "run asy WITHOUT a sandbox when bubblewrap does not work (logs a warning on every task)")
	f.StringVar(&s.workRoot, "work-root", "", "parent of the per-task work directories (default: the system temporary directory)")
	f.Var(&s.addressSpace, "address-space", "address space of a task (RLIMIT_AS), e.g. 1GiB")
	f.DurationVar(&s.cpuTime, "cpu-time", 0, "CPU time of a task (RLIMIT_CPU)")
	f.Var(&s.fileSize, "file-size", "largest file a task may write (RLIMIT_FSIZE)")
	f.IntVar(&s.processes, "processes", 0, "processes of a task (RLIMIT_NPROC)")
	f.IntVar(&s.openFiles, "open-files", 0, "open files of a task (RLIMIT_NOFILE)")
	f.Var(&s.output, "output-limit", "stdout and stderr of a task together")
	f.Var(&s.image, "image-limit", "largest image read back")
	f.DurationVar(&s.maxTimeout, "max-timeout", 0, "wall clock of a task that names no timeout, and the cap of any it names")
	f.DurationVar(&s.interactiveIdle, "interactive-idle", sandbox.DefaultLimits().InteractiveIdle, "an interactive task (a shell) with no input for this long ends: asy gets the end of its input")
}

// config maps the flags onto the runner's configuration.
func (s *sandboxFlags) config(log *slog.Logger) sandbox.Config {
	return sandbox.Config{
		Limits: sandbox.Limits{
			AddressSpace: int64(s.addressSpace), CPUTime: s.cpuTime, FileSize: int64(s.fileSize),
			Processes: s.processes, OpenFiles: s.openFiles, Output: int64(s.output), Image: int64(s.image),
			MaxTimeout: s.maxTimeout, InteractiveIdle: s.interactiveIdle,
		},
		WorkRoot: s.workRoot,
		Insecure: s.insecure,
		Logger:   log,
	}
}

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

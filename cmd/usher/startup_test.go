package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// When the kernel refuses bubblewrap its namespaces (here the real
// bubblewrap with the limit on user namespaces used up), serve and
// backend, in either mode, stop at start-up: exit status 1 and one error,
// the last line of their output and the only one that speaks of it, that
// names the setting to change. None of them listens or takes a task.
func TestStartRefusedBySandbox(t *testing.T) {
	t.Parallel()
	refusing := filepath.Dir(sandboxtest.RefusingBwrap(t, sandboxtest.UserNamespaceLimit))
	work := sandboxtest.WorkRoot(t)
	cases := []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "usher.db"),
			"--backends", "1", "--work-root", work}},
		{"backend", []string{"backend", "--listen", "127.0.0.1:0", "--work-root", work}},
		// Nothing listens on port 1: the sandbox is checked before Redis is dialled.
		{"backend --redis", []string{"backend", "--redis", "redis://127.0.0.1:1", "--listen", "127.0.0.1:0",
			"--work-root", work}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, usherBinary(t), c.args...)
			cmd.Env = append(os.Environ(), "PATH="+refusing+string(os.PathListSeparator)+os.Getenv("PATH"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("usher %s: %v, want exit status 1; stderr:\n%s", c.name, err, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			t.Logf("last line: %s", last)
			prefix := "usher: " + c.args[0] + `: sandbox: step "create namespaces" failed: `
			if !strings.HasPrefix(last, prefix) {
				t.Errorf("last line %q\ndoes not start with %q", last, prefix)
			}
			for _, want := range []string{"(ENOSPC)", `"sysctl -w user.max_user_namespaces=15000"`,
				`; see docs/sandbox.md, "When the sandbox cannot start"`} {
				if !strings.Contains(last, want) {
					t.Errorf("last line lacks %q", want)
				}
			}
			if n := strings.Count(stderr.String(), "namespace"); n != strings.Count(last, "namespace") {
				t.Errorf("namespaces are spoken of before the last line:\n%s", stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %q", stdout.String())
			}
		})
	}
}

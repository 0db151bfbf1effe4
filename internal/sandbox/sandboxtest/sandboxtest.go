// Package sandboxtest helps tests that run real sandboxed tasks.
package sandboxtest

import (
	"os"
	"testing"
)

// WorkRoot returns a fresh work root that the sandbox uid can enter, removed
// when the test ends. (t.TempDir's parent is 0700, so it cannot serve.)
func WorkRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "usher-test-work-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

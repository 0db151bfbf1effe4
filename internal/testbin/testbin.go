// Package testbin builds the usher binary of the module under test, once
// per test process, for tests that run it as separate processes (crash
// tests, multi-node tests).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[bool]string{} // race → binary path
)

// Usher returns the path of ./cmd/usher built from the module under test,
// with the race detector when race is set. The binary lives in a
// temporary directory for the rest of the process.
func Usher(t testing.TB, race bool) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := built[race]; ok {
		return bin
	}
	bin, err := build(race)
	if err != nil {
		t.Fatalf("testbin: %v", err)
	}
	built[race] = bin
	return bin
}

func build(race bool) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside a module")
	}
	dir, err := os.MkdirTemp("", "usher-testbin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "usher")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/usher")...)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/usher: %v\n%s", err, out)
	}
	return bin, nil
}

// Main runs a package's tests and then removes the binaries built for
// them: call os.Exit(testbin.Main(m)) from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	for race, bin := range built {
		os.RemoveAll(filepath.Dir(bin))
		delete(built, race)
	}
	return code
}

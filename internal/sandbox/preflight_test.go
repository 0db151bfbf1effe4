package sandbox

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewWithoutBwrap(t *testing.T) {
	t.Parallel()
	_, err := New(Config{WorkRoot: testWorkRoot(t), BwrapPath: "/nonexistent/bwrap"})
	if err == nil || !strings.Contains(err.Error(), `"bubblewrap"`) || !strings.Contains(err.Error(), `step "find bwrap"`) {
		t.Fatalf("New: %v; want the package and the step named", err)
	}
}

// A root server runs bwrap as the sandbox uid, which must be able to reach
// the work root; a server that is not root needs nothing of the kind.
func TestNewWorkRootUnreachable(t *testing.T) {
	t.Parallel()
	root := testWorkRoot(t)
	hidden := filepath.Join(root, "hidden")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(hidden, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{WorkRoot: work})
	if os.Geteuid() != 0 {
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), `step "reach the work root"`) ||
		!strings.Contains(err.Error(), "cannot enter "+hidden) {
		t.Fatalf("New: %v", err)
	}
	_, err = New(Config{WorkRoot: filepath.Join(hidden, "missing")})
	if err == nil || !strings.Contains(err.Error(), `step "reach the work root"`) {
		t.Fatalf("New: %v", err)
	}
}

func TestNewRefusesNegativeLimits(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{Limits: Limits{Output: -1}}); err == nil {
		t.Fatal("accepted a negative limit")
	}
}

func TestDefaultLimitsFillZeroFields(t *testing.T) {
	t.Parallel()
	l := Limits{Output: 10}.withDefaults()
	d := DefaultLimits()
	d.Output = 10
	if l != d {
		t.Fatalf("got %+v", l)
	}
}

// Insecure mode works without bubblewrap and warns on every task.
func TestInsecureWarnsEveryTask(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	r, err := New(Config{Insecure: true, WorkRoot: testWorkRoot(t), BwrapPath: "/nonexistent/bwrap",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		o, s := runTask(t, r, mainTask(figure))
		wantOutcome(t, o, true, "", s)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 {
		t.Fatalf("%d warnings, want one from New and one per task:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "WITHOUT the sandbox"); n != 2 {
		t.Fatalf("%d task warnings, want 2", n)
	}
}

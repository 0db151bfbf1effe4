package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Refusal is a way a machine refuses what bubblewrap needs, which
// RefusingBwrap reproduces for bubblewrap alone, leaving the machine as it
// is.
type Refusal int

const (
	// UserNamespaceLimit leaves no user namespace to create: the limit
	// user.max_user_namespaces is used up, as on a host where it is 0.
	UserNamespaceLimit Refusal = iota
	// MaskedProc mounts /proc/fs read-only over itself, as Docker does,
	// so that no new /proc may be mounted.
	MaskedProc
	// NamespacesForbidden makes creating a user namespace fail with
	// EPERM, as Docker's default seccomp profile does: bubblewrap runs
	// chrooted (into a bind mount of /, so it sees the same files), and
	// the kernel creates no user namespace for a chrooted process.
	NamespacesForbidden
)

// RefusingBwrap writes a script named bwrap (returned) that runs the real
// bubblewrap under refusal: in a user namespace nested in one of its own
// where the refusal is set up, so that the kernel refuses bubblewrap as a
// machine so configured would. The script's directory can head PATH or
// the script be the BwrapPath; the sandbox uid can run it.
//
// The outer namespace maps the caller to root, which may lower the
// namespace's user.max_user_namespaces (/proc/sys/user is per user
// namespace) or mount in its own mount namespace; bubblewrap runs in the
// inner one as uid 1000, unprivileged, as in production, chrooted for
// NamespacesForbidden. The limit is 1: the inner namespace takes it, and
// bubblewrap's own counts against it too. Nothing of the machine
// changes; the namespaces end with the script.
func RefusingBwrap(t testing.TB, refusal Refusal) string {
	t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatalf("bubblewrap: %v", err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux): %v", err)
	}
	dir := WorkRoot(t)
	var setUp, inner string
	switch refusal {
	case UserNamespaceLimit:
		setUp = "echo 1 > /proc/sys/user/max_user_namespaces"
	case MaskedProc:
		setUp = "mount -o bind,ro /proc/fs /proc/fs"
	case NamespacesForbidden:
		root := filepath.Join(dir, "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		setUp, inner = "mount --rbind / "+root, "--root="+root
	default:
		t.Fatalf("unknown refusal %d", refusal)
	}
	for _, p := range []string{bwrap, unshare, dir} {
		if strings.ContainsAny(p, ` '"$\`) {
			t.Fatalf("%s: the path must not need quoting", p)
		}
	}
	script := fmt.Sprintf(`#!/bin/sh
exec %[1]s --user --map-root-user --mount sh -c '%[2]s && exec %[1]s --user --map-user=1000 --map-group=1000 %[3]s %[4]s "$@"' sh "$@"
`, unshare, setUp, inner, bwrap)
	path := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

package sandbox

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/sandbox/sandboxtest"
)

// What bubblewrap 0.8 (Debian bookworm) prints for each refusal.
const (
	outNoPermissions = "bwrap: No permissions to create new namespace, likely because the kernel does not allow " +
		"non-privileged user namespaces. See <https://deb.li/bubblewrap> or <file:///usr/share/doc/bubblewrap/README.Debian.gz>."
	outLimit     = "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)"
	outUIDMap    = "bwrap: setting up uid map: Permission denied"
	outLoopback  = "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"
	outMountProc = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"
	outProcSysRO = "bwrap: cannot open /proc/sys/user/max_user_namespaces: Read-only file system"
	outHostname  = "bwrap: Can't set hostname to sandbox: Operation not permitted"
	outProcNoSys = "bwrap: Can't read /proc/sys/kernel/overflowuid: No such file or directory"
	outOther     = "bwrap: Can't find source path /var/nowhere: No such file or directory"
)

// An ordinary host: user namespaces allowed, no container, no service
// manager; each case changes what it is about.
var allowed = hostFacts{maxUserNamespaces: "15000", apparmorRestrict: "0"}

func TestNamespaceAdvice(t *testing.T) {
	t.Parallel()
	with := func(change func(*hostFacts)) hostFacts {
		h := allowed
		change(&h)
		return h
	}
	container := with(func(h *hostFacts) { h.container = true })
	cases := []struct {
		name string
		out  string
		host hostFacts
		want string
		// setting is what the operator must find in the advice.
		setting string
	}{
		{"docker's default seccomp profile", outNoPermissions, container,
			adviceContainerSeccomp, "--security-opt seccomp=deploy/seccomp-usher.json"},
		{"max_user_namespaces 0", outNoPermissions, with(func(h *hostFacts) { h.maxUserNamespaces = "0" }),
			adviceUserNSLimit, "sysctl -w user.max_user_namespaces=15000"},
		{"user namespaces used up", outLimit, allowed,
			adviceUserNSLimit, "sysctl -w user.max_user_namespaces=15000"},
		{"user namespaces used up in a container", outLimit, container,
			adviceUserNSLimit + adviceUserNSLimitContainer, "on the host"},
		{"unprivileged_userns_clone 0", outNoPermissions, with(func(h *hostFacts) { h.unprivilegedClone = "0" }),
			adviceUnprivilegedClone, "sysctl -w kernel.unprivileged_userns_clone=1"},
		{"unprivileged_userns_clone 1", outNoPermissions, with(func(h *hostFacts) { h.unprivilegedClone = "1" }),
			adviceGeneric, "user.max_user_namespaces"},
		{"ubuntu's apparmor restriction, uid map", outUIDMap, with(func(h *hostFacts) { h.apparmorRestrict = "1" }),
			adviceAppArmorRestrict, "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"},
		{"ubuntu's apparmor restriction, loopback", outLoopback, with(func(h *hostFacts) { h.apparmorRestrict = "1" }),
			adviceAppArmorRestrict, `"userns,"`},
		{"masked /proc in a container", outMountProc, container,
			adviceContainerProc, "--security-opt systempaths=unconfined"},
		{"read-only /proc/sys in a container", outProcSysRO, container,
			adviceContainerProc, "--security-opt systempaths=unconfined"},
		{"read-only /proc/sys under systemd", outProcSysRO, with(func(h *hostFacts) { h.systemd = true }),
			adviceSystemdProc, "ProtectKernelTunables="},
		{"masked /proc in a container with apparmor", outMountProc,
			with(func(h *hostFacts) { h.container, h.apparmor = true, true }),
			adviceContainerProc + adviceContainerAppArmor, "--security-opt apparmor=unconfined"},
		{"masked /proc under apparmor's restriction", outMountProc,
			with(func(h *hostFacts) { h.container, h.apparmorRestrict = true, "1" }),
			adviceContainerProc, "systempaths=unconfined"},
		{"systemd unit restricting namespaces", outNoPermissions, with(func(h *hostFacts) { h.systemd = true }),
			adviceSystemdNamespaces, "RestrictNamespaces="},
		{"systemd unit with a system call filter", "bwrap: Creating new namespace failed: Operation not permitted",
			with(func(h *hostFacts) { h.systemd = true }), adviceSystemdNamespaces, "SystemCallFilter="},
		{"systemd unit masking /proc", outMountProc, with(func(h *hostFacts) { h.systemd = true }),
			adviceSystemdProc, "ProtectKernelTunables="},
		{"systemd unit forbidding sethostname", outHostname, with(func(h *hostFacts) { h.systemd = true }),
			adviceSystemdNamespaces, "ProtectHostname="},
		{"systemd unit hiding /proc/sys", outProcNoSys, with(func(h *hostFacts) { h.systemd = true }),
			adviceSystemdProc, "ProcSubset="},
		{"masked /proc elsewhere", outMountProc, allowed, adviceProc, "masks parts of /proc"},
		{"refused for no visible reason", outNoPermissions, allowed,
			adviceGeneric, "kernel.apparmor_restrict_unprivileged_userns"},
		{"another fault", outOther, container, "", ""},
		{"another fault under systemd", outOther, with(func(h *hostFacts) { h.systemd = true }), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := namespaceAdvice(c.out, c.host)
			if got != c.want {
				t.Fatalf("advice:\n%s\nwant:\n%s", got, c.want)
			}
			if !strings.Contains(got, c.setting) {
				t.Fatalf("advice %q does not name %q", got, c.setting)
			}
		})
	}
}

// The advice follows bwrap's words as a sentence of its own, with where
// to read more; without advice the error is bwrap's words alone.
func TestWithAdvice(t *testing.T) {
	t.Parallel()
	got := withAdvice(outNoPermissions, adviceContainerSeccomp)
	want := outNoPermissions + " " + adviceContainerSeccomp + `; see docs/sandbox.md, "When the sandbox cannot start"`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := withAdvice(outMountProc, adviceProc); !strings.HasPrefix(got, outMountProc+". Something") {
		t.Fatalf("no full stop between bwrap's words and the advice: %s", got)
	}
	if got := withAdvice(outOther, ""); got != outOther {
		t.Fatalf("got %q", got)
	}
}

func TestReadHostFacts(t *testing.T) {
	t.Parallel()
	write := func(root, name, data string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	noEnv := func(string) string { return "" }

	host := t.TempDir()
	write(host, "proc/sys/user/max_user_namespaces", "0\n")
	write(host, "proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1\n")
	write(host, "sys/module/apparmor/parameters/enabled", "Y\n")
	write(host, "proc/1/cgroup", "0::/init.scope\n")
	want := hostFacts{maxUserNamespaces: "0", apparmorRestrict: "1", apparmor: true}
	if got := readHostFacts(host, noEnv); got != want {
		t.Fatalf("host: %+v, want %+v", got, want)
	}
	env := map[string]string{"INVOCATION_ID": "5e1f", "container": "podman"}
	if got := readHostFacts(t.TempDir(), func(k string) string { return env[k] }); !got.systemd || !got.container {
		t.Fatalf("environment: %+v", got)
	}

	for _, c := range []struct{ name, data string }{
		{".dockerenv", ""},
		{"run/.containerenv", ""},
		{"proc/1/cgroup", "0::/system.slice/docker-0123abcd.scope\n"},
		{"proc/1/cgroup", "12:pids:/kubepods/besteffort/pod1234/5678\n"},
		{"proc/1/cgroup", "0::/system.slice/containerd.service\n"},
	} {
		root := t.TempDir()
		write(root, c.name, c.data)
		if got := readHostFacts(root, noEnv); !got.container {
			t.Errorf("%s %q: not taken for a container", c.name, c.data)
		}
	}
}

// The real bubblewrap, refused by the kernel as a machine so configured
// would refuse it: New stops at the namespaces step, with bwrap's words
// and the setting to change.
func TestNewUnderRealRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		refusal sandboxtest.Refusal
		want    []string
	}{
		{"user namespaces used up", sandboxtest.UserNamespaceLimit,
			[]string{"(ENOSPC)", adviceUserNSLimit, `"sysctl -w user.max_user_namespaces=15000"`}},
		{"namespaces forbidden", sandboxtest.NamespacesForbidden, []string{outNoPermissions}},
		{"masked /proc", sandboxtest.MaskedProc,
			[]string{"bwrap: Can't mount proc on /newroot/proc: Operation not permitted", "masks parts of /proc, so bubblewrap cannot mount its own"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(Config{WorkRoot: testWorkRoot(t), BwrapPath: sandboxtest.RefusingBwrap(t, c.refusal)})
			if err == nil {
				t.Fatal("New accepted a bubblewrap the kernel refuses")
			}
			t.Logf("New: %v", err)
			want := append([]string{`step "create namespaces" failed`, `(Debian package "bubblewrap")`, adviceSection}, c.want...)
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New: %v\nlacks %q", err, w)
				}
			}
		})
	}
}

// In a Docker container with the default seccomp profile, New's whole
// error: the step, bwrap's words (the real bubblewrap refused with EPERM,
// as the profile refuses it) and the profile to use instead.
func TestDockerSeccompErrorText(t *testing.T) {
	t.Parallel()
	bwrap := sandboxtest.RefusingBwrap(t, sandboxtest.NamespacesForbidden)
	r := &Runner{limits: DefaultLimits(), log: slog.Default(), uid: nobody, gid: nobody,
		asRoot: os.Geteuid() == 0, rootfs: rootfsArgs()}
	if err := r.setWorkRoot(testWorkRoot(t)); err != nil {
		t.Fatal(err)
	}
	if err := r.findTools(bwrap); err != nil {
		t.Fatal(err)
	}
	err := r.emptySandbox()
	if err == nil {
		t.Fatal("the empty sandbox ran although namespaces are forbidden")
	}
	got := namespacesError(err, hostFacts{maxUserNamespaces: "15000", container: true}).Error()
	want := `sandbox: step "create namespaces" failed: bubblewrap (Debian package "bubblewrap") cannot create ` +
		`its namespaces or mounts: ` + bwrap + ` failed: bwrap: No permissions to create new namespace, likely ` +
		`because the kernel does not allow non-privileged user namespaces. See <https://deb.li/bubblewrap> or ` +
		`<file:///usr/share/doc/bubblewrap/README.Debian.gz>. The container's seccomp profile (Docker's default ` +
		`one) forbids creating namespaces: start the container with usher's profile, --security-opt ` +
		`seccomp=deploy/seccomp-usher.json (compose: security_opt: ["seccomp=deploy/seccomp-usher.json"]); ` +
		`see docs/sandbox.md, "When the sandbox cannot start"`
	if got != want {
		t.Fatalf("error:\n%s\nwant:\n%s", got, want)
	}
}

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// When bubblewrap cannot create its namespaces or mount its /proc, New's
// error says which setting of the machine, the container or the service
// refuses them and how to change it, from what bwrap printed and a few
// facts of the host (docs/sandbox.md, "When the sandbox cannot start").

// adviceSection is where the operator reads more about each refusal.
const adviceSection = `docs/sandbox.md, "When the sandbox cannot start"`

// The advice for each refusal, one definition each (the tests and
// docs/sandbox.md quote them).
const (
	adviceUserNSLimit = `The kernel's limit on user namespaces leaves none for bubblewrap (user.max_user_namespaces, ` +
		`/proc/sys/user/max_user_namespaces): raise it with "sysctl -w user.max_user_namespaces=15000" ` +
		`and keep the setting in a file under /etc/sysctl.d/`
	adviceUserNSLimitContainer = `, on the host: a container shares the host's limit`
	adviceUnprivilegedClone    = `The kernel lets no unprivileged user create user namespaces ` +
		`(kernel.unprivileged_userns_clone is 0): allow it with "sysctl -w kernel.unprivileged_userns_clone=1" ` +
		`and keep the setting in a file under /etc/sysctl.d/`
	adviceAppArmorRestrict = `AppArmor restricts unprivileged user namespaces ` +
		`(kernel.apparmor_restrict_unprivileged_userns is 1, as on Ubuntu 23.10 and later): ` +
		`give /usr/bin/bwrap an AppArmor profile that allows "userns," or lift the restriction with ` +
		`"sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"`
	adviceSystemdNamespaces = `usher runs as a systemd service whose unit forbids namespaces or the sandbox's hostname: ` +
		`remove RestrictNamespaces=, ProtectHostname= and any SystemCallFilter= that leaves out unshare, clone, mount ` +
		`or sethostname from the unit (deploy/usher.service is one that works)`
	adviceSystemdProc = `usher runs as a systemd service whose unit hides or write-protects parts of /proc that bubblewrap needs: ` +
		`remove ProtectKernelTunables= and ProcSubset= from the unit, and ProtectKernelLogs= and ProtectProc= ` +
		`if bubblewrap still cannot mount its /proc (deploy/usher.service is one that works)`
	adviceContainerSeccomp = `The container's seccomp profile (Docker's default one) forbids creating namespaces: ` +
		`start the container with usher's profile, --security-opt seccomp=deploy/seccomp-usher.json ` +
		`(compose: security_opt: ["seccomp=deploy/seccomp-usher.json"])`
	adviceContainerProc = `The container runtime masks parts of /proc, so bubblewrap cannot mount its own: ` +
		`start the container with --security-opt systempaths=unconfined ` +
		`(Compose v2: security_opt: ["systempaths=unconfined"])`
	adviceContainerAppArmor = `, and, AppArmor being on, --security-opt apparmor=unconfined`
	adviceProc              = `Something masks parts of /proc (a container runtime, or a service manager's ` +
		`ProtectKernelTunables=), so bubblewrap cannot mount its own: run usher where all of /proc is visible`
	adviceGeneric = `Something refuses unprivileged user namespaces: check user.max_user_namespaces (above 0), ` +
		`kernel.unprivileged_userns_clone (1, where it exists), kernel.apparmor_restrict_unprivileged_userns (0) ` +
		`and any seccomp filter usher runs under`
)

// hostFacts is what namespaceAdvice knows of the machine besides what
// bwrap printed. A sysctl that cannot be read is "".
type hostFacts struct {
	maxUserNamespaces string // user.max_user_namespaces (of this user namespace)
	unprivilegedClone string // kernel.unprivileged_userns_clone (Debian's older kernels)
	apparmorRestrict  string // kernel.apparmor_restrict_unprivileged_userns (Ubuntu 23.10+)
	apparmor          bool   // AppArmor is enabled
	container         bool   // usher runs in a container
	systemd           bool   // usher runs as a systemd service
}

// readHostFacts reads the facts under root ("/" but in tests) and from
// getenv.
func readHostFacts(root string, getenv func(string) string) hostFacts {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(root, name))
		return err == nil
	}
	return hostFacts{
		maxUserNamespaces: read("proc/sys/user/max_user_namespaces"),
		unprivilegedClone: read("proc/sys/kernel/unprivileged_userns_clone"),
		apparmorRestrict:  read("proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
		apparmor:          read("sys/module/apparmor/parameters/enabled") == "Y",
		container: exists(".dockerenv") || exists("run/.containerenv") || getenv("container") != "" ||
			containerCgroup(read("proc/1/cgroup")),
		systemd: getenv("INVOCATION_ID") != "",
	}
}

// containerCgroup reports whether PID 1's cgroups (/proc/1/cgroup) are
// those of a container.
func containerCgroup(cgroup string) bool {
	for _, word := range []string{"docker", "containerd", "kubepods"} {
		if strings.Contains(cgroup, word) {
			return true
		}
	}
	return false
}

// namespaceAdvice is the advice for bwrap's output out when it could not
// start an empty sandbox on a host with facts h: which setting refuses
// the namespaces or the /proc mount and how to change it, or "" when out
// is no refusal of the kind.
func namespaceAdvice(out string, h hostFacts) string {
	// Docker mounts parts of /proc read-only over themselves (/proc/sys
	// among them) and masks others: bubblewrap cannot mount its own
	// /proc, or fails on writing /proc/sys first.
	// systemd's ProcSubset=pid hides /proc/sys, which bubblewrap reads.
	proc := strings.Contains(out, "Can't mount proc") ||
		strings.Contains(out, "/proc/") && strings.Contains(out, "Read-only file system") ||
		strings.Contains(out, "/proc/sys/") && strings.Contains(out, "No such file or directory")
	cloneRefused := strings.Contains(out, "No permissions to create")
	switch {
	case strings.Contains(out, "ENOSPC") || strings.Contains(out, "No space left on device") ||
		h.maxUserNamespaces == "0":
		if h.container {
			return adviceUserNSLimit + adviceUserNSLimitContainer
		}
		return adviceUserNSLimit
	case h.unprivilegedClone == "0":
		return adviceUnprivilegedClone
	case h.apparmorRestrict == "1" && !cloneRefused && !proc:
		return adviceAppArmorRestrict
	case !proc && !refused(out):
		return ""
	case h.systemd && proc:
		return adviceSystemdProc
	case h.systemd:
		return adviceSystemdNamespaces
	case h.container && proc && h.apparmor:
		return adviceContainerProc + adviceContainerAppArmor
	case h.container && proc:
		return adviceContainerProc
	case h.container:
		return adviceContainerSeccomp
	case proc:
		return adviceProc
	case h.apparmorRestrict == "1":
		return adviceAppArmorRestrict
	}
	return adviceGeneric
}

// refused reports whether bwrap's output out is a refusal of namespaces,
// mounts or ids rather than another fault.
func refused(out string) bool {
	for _, s := range []string{"namespace", "Operation not permitted", "Permission denied", "uid map", "Can't mount"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// withAdvice appends advice, if any, and where to read more to msg, the
// error of the empty sandbox.
func withAdvice(msg, advice string) string {
	if advice == "" {
		return msg
	}
	msg = strings.TrimSpace(msg)
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg + " " + advice + "; see " + adviceSection
}

// namespacesError is New's error when the empty sandbox failed with err
// on a host with facts h.
func namespacesError(err error, h hostFacts) error {
	return stepError(stepNamespaces, &adviceError{
		err:    fmt.Errorf("bubblewrap (Debian package \"bubblewrap\") cannot create its namespaces or mounts: %w", err),
		advice: namespaceAdvice(err.Error(), h),
	})
}

// adviceError is err followed by advice (withAdvice).
type adviceError struct {
	err    error
	advice string
}

func (e *adviceError) Error() string { return withAdvice(e.err.Error(), e.advice) }

func (e *adviceError) Unwrap() error { return e.err }

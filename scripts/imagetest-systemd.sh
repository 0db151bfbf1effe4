#!/usr/bin/env bash
# The systemd part of the image test (scripts/imagetest.sh calls it):
# deploy/usher.service, installed as docs/deploy.md says, runs under
# systemd as PID 1 of a container, and its sandbox works under the unit's
# hardening:
#   1. the image $IMAGE plus systemd and curl, with usher's user, binary
#      and unit taken away again, so that docs/deploy.md's block (the one
#      after <!-- imagetest: systemd -->) installs them as on a host;
#   2. the unit is active and answers /readyz; the render API renders a
#      2D svg and a 3D png (Mesa's llvmpipe JIT) in the sandbox;
#   3. the hardening is in force for the running process: no new
#      privileges, a seccomp filter, an empty capability bounding set, and
#      a read-only /usr in the service's mount namespace;
#   4. `systemctl stop` ends the service cleanly, and an option the unit
#      leaves off for the sandbox's sake (ProtectKernelTunables=) does stop
#      the service from starting, with the sandbox's error;
# and prints `systemd-analyze security`'s exposure level.
#
# Needs IMAGE (the usher image) and DOCKER_HOST (the engine of
# scripts/imagetest.sh, which has no NAT: the build uses the host's
# network, the container needs none). The test image starts from IMAGE,
# so STANDIN_DEBIAN, which scripts/imagetest.sh passes too, goes unused.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deploy-blocks.sh
: "${IMAGE:?IMAGE is the usher image to test}"
docker() { /usr/bin/docker "$@"; }
say() { echo "imagetest-systemd: $*"; }
fail() {
  echo "imagetest-systemd: FAIL: $*" >&2
  if [[ -n ${container:-} ]]; then
    echo "--- systemctl status usher; journalctl -u usher (last 20 lines):" >&2
    docker exec "$container" systemctl --no-pager status usher >&2 2>&1 || true
    docker exec "$container" journalctl --no-pager -u usher -n 20 >&2 2>&1 || true
  fi
  exit 1
}

t0=$(date +%s)
testimage=usher-systemd:imagetest
container=
run=$(mktemp -d /tmp/usher-imagetest-systemd.XXXXXX)
cleanup() {
  [[ -n $container ]] && docker rm -f -v "$container" >/dev/null 2>&1
  rm -rf "$run"
}
trap cleanup EXIT

# The test image: systemd as PID 1, and a checkout's bin/usher and
# deploy/usher.service in /root/usher for the docs' block to install.
build_image() {
  local ctx="$run/ctx"
  mkdir -p "$ctx/deploy"
  cp deploy/usher.service "$ctx/deploy/"
  cat >"$ctx/Dockerfile" <<EOF
FROM $IMAGE
USER root
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends systemd curl \\
 && rm -rf /var/lib/apt/lists/*
RUN mkdir -p /root/usher/bin && mv /usr/local/bin/usher /root/usher/bin/usher \\
 && userdel usher && (groupdel usher 2>/dev/null || true) && rm -rf /var/lib/usher/* \\
 && systemctl mask systemd-logind.service getty.target console-getty.service
COPY deploy /root/usher/deploy
WORKDIR /root/usher
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/lib/systemd/systemd"]
CMD []
EOF
  docker build -q --network host -t "$testimage" "$ctx" >"$run/build.log" 2>&1 ||
    { cat "$run/build.log" >&2; fail "docker build of $testimage"; }
}

# ctr CMD...: runs CMD in the container.
ctr() { docker exec "$container" "$@"; }

start_systemd() {
  container=usher-systemd-$$
  # What --privileged gives systemd, but for CAP_SYS_RESOURCE, which
  # some machines (virtual ones among them) do not give even to root,
  # and which --privileged would ask for regardless.
  local caps=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
    LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER
    SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_TIME
    SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG
    WAKE_ALARM BLOCK_SUSPEND AUDIT_READ)
  docker run -d --name "$container" "${caps[@]/#/--cap-add=}" --security-opt seccomp=unconfined \
    --security-opt apparmor=unconfined --security-opt systempaths=unconfined --cgroupns=host \
    -v /sys/fs/cgroup:/sys/fs/cgroup:rw --tmpfs /run --tmpfs /run/lock "$testimage" >/dev/null ||
    fail "docker run of $testimage"
  local state
  for _ in $(seq 300); do
    state=$(ctr systemctl is-system-running 2>/dev/null) || true
    [[ $state == running || $state == degraded ]] && return 0
    sleep 0.1
  done
  docker logs "$container" >&2 2>&1
  fail "systemd did not come up in 30 s (state: ${state:-none})"
}

# wait_ready: the unit active and /readyz answering, for 120 s (the
# server's start renders test figures in the sandbox).
wait_ready() {
  local state
  for _ in $(seq 600); do
    state=$(ctr systemctl is-active usher 2>/dev/null) || true
    [[ $state == failed || $(ctr systemctl show -p NRestarts --value usher) != 0 ]] &&
      fail "usher.service failed to start"
    [[ $state == active ]] && ctr curl -fs http://127.0.0.1:8080/readyz >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  fail "usher.service: /readyz did not answer within 120 s (state: $state)"
}

# render FORMAT SOURCE MAGIC: the render API's answer is a FORMAT image
# starting with MAGIC (hex).
render() {
  local out="$run/render.$1" code
  code=$(printf '%s' "$2" | docker exec -i "$container" curl -s -o /tmp/render -w '%{http_code}' \
    -H 'Content-Type: text/plain' --data-binary @- "http://127.0.0.1:8080/api/render?format=$1")
  ctr cat /tmp/render >"$out"
  [[ $code == 200 ]] || fail "render $1: HTTP $code: $(head -c 500 "$out")"
  [[ $(head -c $((${#3} / 2)) "$out" | od -An -tx1 | tr -d ' \n') == "$3" ]] ||
    fail "render $1: not a $1 image: $(head -c 100 "$out" | od -c | head -3)"
  say "rendered $1 in the sandbox under systemd ($(wc -c <"$out") bytes)"
}

# check_hardening: the kernel's view of the service's main process.
check_hardening() {
  local pid status
  pid=$(ctr systemctl show -p MainPID --value usher)
  [[ $pid =~ ^[1-9][0-9]*$ ]] || fail "no main process: MainPID=$pid"
  status=$(ctr cat "/proc/$pid/status")
  grep -qx $'NoNewPrivs:\t1' <<<"$status" || fail "the service may gain privileges: $(grep NoNewPrivs <<<"$status")"
  grep -qx $'Seccomp:\t2' <<<"$status" || fail "the service has no seccomp filter: $(grep Seccomp: <<<"$status")"
  grep -qx $'CapBnd:\t0000000000000000' <<<"$status" || fail "the service's capability bounding set is not empty: $(grep CapBnd <<<"$status")"
  # Even root, in the service's mount namespace, cannot write /usr
  # (ProtectSystem=strict), while the state directory is writable.
  local out
  if out=$(ctr nsenter -t "$pid" -m touch /usr/usher-write-test 2>&1); then
    fail "/usr is writable in the service's mount namespace"
  fi
  [[ $out == *"Read-only file system"* ]] || fail "writing /usr in the service's mount namespace: $out"
  ctr nsenter -t "$pid" -m test -f /var/lib/usher/usher.db || fail "no /var/lib/usher/usher.db in the service's mount namespace"
  say "hardening in force: NoNewPrivs 1, Seccomp 2, CapBnd 0, /usr read-only"
}

# check_dropped: an option the unit leaves off for the sandbox's sake
# stops the service with the sandbox's error, so the unit's comments stay
# true and this test would see a unit that breaks the sandbox.
check_dropped() {
  local since
  since=$(ctr date '+%Y-%m-%d %H:%M:%S')
  ctr mkdir -p /run/systemd/system/usher.service.d
  printf '[Service]\nProtectKernelTunables=yes\nRestart=no\n' |
    docker exec -i "$container" tee /run/systemd/system/usher.service.d/imagetest.conf >/dev/null
  ctr systemctl daemon-reload
  ctr systemctl restart usher || true
  local state
  for _ in $(seq 300); do
    state=$(ctr systemctl is-active usher 2>/dev/null) || true
    [[ $state == failed ]] && break
    sleep 0.2
  done
  [[ $state == failed ]] || fail "with ProtectKernelTunables=yes the service did not fail (state: $state)"
  ctr journalctl --no-pager -u usher --since "$since" | grep 'step "create namespaces" failed' | grep -q 'bwrap: ' ||
    fail "with ProtectKernelTunables=yes the service failed without bubblewrap's error: $(ctr journalctl --no-pager -u usher --since "$since" | tail -5)"
  say "with ProtectKernelTunables=yes the sandbox cannot start and neither does the service, as the unit says"
  ctr rm /run/systemd/system/usher.service.d/imagetest.conf
  ctr systemctl daemon-reload
  ctr systemctl reset-failed usher
}

check_stop() {
  ctr systemctl stop usher || fail "systemctl stop usher"
  local result
  result=$(ctr systemctl show -p Result --value usher)
  [[ $result == success ]] || fail "usher.service stopped with result $result"
  say "systemctl stop: result $result"
}

# The unit the docs print is deploy/usher.service.
diff -u <(deploy_block "systemd unit" ini) deploy/usher.service >"$run/unit.diff" ||
  { cat "$run/unit.diff" >&2; fail "the unit printed in the docs is not deploy/usher.service"; }
block=$(deploy_block systemd sh)
[[ -n $block ]] || fail "no <!-- imagetest: systemd --> shell block in the docs"
build_image
start_systemd
say "docs' install block in the container ($(wc -l <<<"$block") commands)"
ctr bash -euo pipefail -c "$block" >"$run/install.log" 2>&1 ||
  { cat "$run/install.log" >&2; fail "the install block of the docs"; }
[[ $(ctr systemctl is-enabled usher) == enabled ]] || fail "usher.service is not enabled"
wait_ready
say "usher.service active, /readyz answers"
render svg 'size(3cm); draw(unitcircle); label("$\int_0^1 x\,dx$", (0,0));' 3c3f786d6c
render png 'import three; size(3cm); draw(unitsphere, red); label("$z$", (0,0,1.3));' 89504e470d0a1a0a
check_hardening
check_stop
check_dropped
say "$(ctr systemd-analyze security usher 2>&1 | grep 'Overall exposure level')"
say "ok ($(($(date +%s) - t0)) s)"
